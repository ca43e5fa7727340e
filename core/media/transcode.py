"""Any audio a speech endpoint returns (MP3, WAV, AAC, FLAC...) -> OGG/Opus for Telegram.

Why: a Telegram voice bubble must be OGG/Opus; many OpenAI-compatible speech servers
ignore `response_format` and return MP3 or WAV. PyAV's wheels bundle FFmpeg and libopus,
so no system ffmpeg is needed. Mono 48 kHz, which is what Opus voice uses.
"""

from __future__ import annotations

import io

MAX_OUTPUT_BYTES = 20 * 1024 * 1024


class TranscodeError(ValueError):
    """The audio could not be decoded or re-encoded."""


def to_ogg_opus(data: bytes, bitrate: int = 32_000) -> bytes:
    """Decode `data` (any format FFmpeg reads) and encode it as OGG/Opus. CPU-bound."""
    import av  # lazy: only spoken replies in another format need it

    out = io.BytesIO()
    try:
        with av.open(io.BytesIO(data), mode="r") as source:
            if not source.streams.audio:
                raise TranscodeError("no audio stream")
            with av.open(out, mode="w", format="ogg") as sink:
                stream = sink.add_stream("libopus", rate=48_000)
                stream.bit_rate = bitrate
                stream.layout = "mono"
                resampler = av.AudioResampler(format="s16", layout="mono", rate=48_000)
                for frame in source.decode(audio=0):
                    for ready in resampler.resample(frame):
                        for packet in stream.encode(ready):
                            sink.mux(packet)
                        if out.tell() > MAX_OUTPUT_BYTES:
                            raise TranscodeError("the spoken reply is too long")
                for ready in resampler.resample(None):
                    for packet in stream.encode(ready):
                        sink.mux(packet)
                for packet in stream.encode(None):
                    sink.mux(packet)
    except TranscodeError:
        raise
    except (av.error.FFmpegError, ValueError, OSError) as exc:
        raise TranscodeError(f"cannot transcode: {type(exc).__name__}") from None
    return out.getvalue()
