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


def wav_seconds(data: bytes) -> float | None:
    """The length of a WAV, for the max_seconds check when the platform did not say."""
    try:
        with wave.open(io.BytesIO(data), "rb") as wav:
            return wav.getnframes() / float(wav.getframerate() or 1)
    except (wave.Error, EOFError):
        return None


def ready_for_api(data: bytes) -> tuple[bytes, str, str]:
    """(bytes, file name, mime) an OpenAI-compatible transcription endpoint takes."""
    if is_silk(data):
        data = silk_to_wav(data)
    found = sniff_audio(data)
    if found is None:
        raise BadAudio("not an audio format the speech service takes")
    ext, mime = found
    return data, f"voice.{ext}", mime
