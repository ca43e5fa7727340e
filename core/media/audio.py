"""Audio bytes: what format they are, and turning QQ's SILK into something an API takes.

Why sniff: a transcription endpoint takes OGG/Opus, MP3, WAV, M4A, WebM and FLAC as
they are (sent as received, never transcoded), but it must be told a file name with
the right extension. QQ voice is often raw SILK (Tencent's codec), which no endpoint
takes: it is decoded to PCM with the `silk-python` wheel and wrapped as WAV.
"""

from __future__ import annotations

import io
import wave

SILK_RATE = 24_000


class BadAudio(ValueError):
    """Audio we cannot send anywhere; str(exc) is a short reason."""


def sniff_audio(data: bytes) -> tuple[str, str] | None:
    """(extension, mime) for a format transcription endpoints take; None otherwise."""
    head = data[:64]
    if head.startswith(b"OggS"):
        return "ogg", "audio/ogg"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav", "audio/wav"
    if head.startswith(b"fLaC"):
        return "flac", "audio/flac"
    if head.startswith(b"\x1aE\xdf\xa3"):
        return "webm", "audio/webm"
    if head[4:8] == b"ftyp":
        return "m4a", "audio/mp4"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "mp3", "audio/mpeg"
    return None


def is_silk(data: bytes) -> bool:
    return data[:10].lstrip(b"\x02").startswith(b"#!SILK")


def silk_to_wav(data: bytes, rate: int = SILK_RATE) -> bytes:
    """Decode SILK v3 to a mono 16-bit WAV. CPU-bound: run it in a worker thread."""
    try:
        import pysilk  # the `silk-python` wheel; lazy, only QQ voice needs it
    except ImportError:
        raise BadAudio("SILK voice cannot be decoded here (silk-python is missing)") from None
    if data.startswith(b"\x02"):
        data = data[1:]  # QQ's variant puts one byte before the standard header
    pcm = io.BytesIO()
    try:
        pysilk.decode(io.BytesIO(data), pcm, rate)
    except Exception:  # the decoder raises its own error types on broken input
        raise BadAudio("the SILK voice could not be decoded") from None
    return pcm_to_wav(pcm.getvalue(), rate)


def pcm_to_wav(pcm: bytes, rate: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm)
    return out.getvalue()


def measured_seconds(data: bytes, limit_s: float) -> float:
    """Seconds of sound in `data`, counted by decoding it (PyAV), stopping just past
    `limit_s`: a result above `limit_s` means "too long", not the whole length.

    Why decode and count samples: the duration a platform reports and the one a container
    header declares (a WAV's frame count, an Ogg granule position) are written by the
    sender; a note "of 1 s" can hold 2,000 s that the speech service bills in full. Why
    stop at the limit: counting a long file to its end costs CPU for nothing. Audio that
    cannot be decoded cleanly to the end (or the limit) is refused: a decoder that skips a
    broken packet (as the speech service's may) could find more behind it. CPU-bound.
    """
    import av  # lazy: PyAV (FFmpeg) only when a voice note is heard

    samples = 0
    rate = 0
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise BadAudio("there is no sound in it")
            stream = container.streams.audio[0]
            for frame in container.decode(stream):
                rate = frame.sample_rate or rate
                samples += frame.samples
                if rate and samples / rate > limit_s:
                    break
    except BadAudio:
        raise
    except (av.error.FFmpegError, ValueError, OSError, EOFError):
        raise BadAudio("the audio could not be decoded") from None
    if not rate:
        raise BadAudio("there is no sound in it")
    return samples / rate


def ready_for_api(data: bytes) -> tuple[bytes, str, str]:
    """(bytes, file name, mime) an OpenAI-compatible transcription endpoint takes."""
    if is_silk(data):
        data = silk_to_wav(data)
    found = sniff_audio(data)
    if found is None:
        raise BadAudio("not an audio format the speech service takes")
    ext, mime = found
    return data, f"voice.{ext}", mime
