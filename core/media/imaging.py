"""Decode-check and downscale images before a model sees them (Pillow).

Why decode: magic bytes say "PNG" for a truncated or forged file too, and a vision
endpoint that gets one fails or bills for nothing. Why downscale: a 12-megapixel phone
photo costs far more tokens and upload time than the model needs to describe it; vision
models read about 2k pixels on the long side anyway. Images already small enough are
passed on byte for byte, so the content hash (and the description cache) stays stable.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

DEFAULT_MAX_SIDE = 2048
DEFAULT_MAX_PIXELS = 24_000_000  # a decompression bomb guard well below Pillow's own
FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}


class BadImage(ValueError):
    """The bytes are not a readable JPEG, PNG, GIF or WebP within the limits."""


class TooManyPixels(BadImage):
    """Refused from its header, before decoding: decoding would take too much memory.

    Why before: a 150 KB PNG can declare 40 megapixels, and decoding it takes about half
    a gigabyte. str(exc) is a note fit for the model and the log (no parentheses)."""

    def __init__(self, width: int, height: int, max_pixels: int) -> None:
        self.width, self.height, self.max_pixels = width, height, max_pixels
        super().__init__(
            f"{width}x{height} pixels is {width * height / 1e6:.3g} megapixels, "
            f"over the {max_pixels / 1e6:g} megapixel limit"
        )


@dataclass(frozen=True)
class ReadyImage:
    data: bytes
    mime: str
    width: int
    height: int
    downscaled: bool = False


def prepare_image(
    data: bytes, *, max_side: int = DEFAULT_MAX_SIDE, max_pixels: int = DEFAULT_MAX_PIXELS
) -> ReadyImage:
    """Fully decode `data`; downscale it when its long side exceeds `max_side`.

    CPU-bound: call it from a worker thread. Raises BadImage with a short reason.
    """
    try:
        with Image.open(io.BytesIO(data)) as image:
            mime = FORMATS.get(image.format or "")
            if mime is None:
                raise BadImage(f"unsupported format {image.format}")
            width, height = image.size  # from the header: nothing is decoded yet
            if width < 1 or height < 1:
                raise BadImage(f"{width}x{height} pixels is outside the limits")
            if width * height > max_pixels:
                raise TooManyPixels(width, height, max_pixels)
            if max(width, height) > max_side and mime == "image/jpeg":
                # JPEG decodes at 1/2, 1/4 or 1/8 scale directly: less memory, same result
                image.draft(None, (max_side, max_side))
            image.load()  # decodes everything: truncated or corrupt data fails here
            if max(width, height) <= max_side:
                return ReadyImage(data, mime, width, height)
            return _downscaled(image, max_side)
    except BadImage:
        raise
    except Image.DecompressionBombError:  # Pillow's own guard, far above ours
        raise BadImage("too many pixels") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise BadImage(f"cannot decode: {type(exc).__name__}") from None


def _downscaled(image: Image.Image, max_side: int) -> ReadyImage:
    frame = image.copy()  # the first frame of an animation
    frame.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    has_alpha = frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info
    if has_alpha:
        frame.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        frame.convert("RGB").save(out, format="JPEG", quality=85)
        mime = "image/jpeg"
    return ReadyImage(out.getvalue(), mime, frame.width, frame.height, downscaled=True)
