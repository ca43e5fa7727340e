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
# Pillow decodes every WebP through libwebp's animation decoder: two full RGBA canvases
# and a copy besides the image, about 16 bytes a pixel against 3-4 for PNG. A quarter of
# the pixel limit keeps a WebP within the same memory as any other format.
WEBP_SHARE = 4
FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}


class BadImage(ValueError):
    """The bytes are not a readable JPEG, PNG, GIF or WebP within the limits."""


class TooManyPixels(BadImage):
    """Refused from its header, before decoding: decoding would take too much memory.

    Why before: a small PNG can declare 40 megapixels, hundreds of megabytes decoded.
    str(exc) is a note fit for the model and the log (no parentheses)."""

    def __init__(self, width: int, height: int, max_pixels: int, kind: str = "") -> None:
        self.width, self.height, self.max_pixels = width, height, max_pixels
        super().__init__(
            f"{width}x{height} pixels is {width * height / 1e6:.3g} megapixels, "
            f"over the {max_pixels / 1e6:g} megapixel limit{kind}"
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

    Memory (see docs/channels.md): a JPEG is decoded at 1/2, 1/4 or 1/8 scale straight to
    about twice the size wanted (a 24-megapixel photo takes under 30 MB); other formats
    are decoded whole in their own mode (at most 4 bytes a pixel: 96 MB at 24 megapixels)
    and shrunk strip by strip, so no second full-size copy (RGBA, premultiplied) is made.
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
            if mime == "image/webp" and width * height > max_pixels // WEBP_SHARE:
                raise TooManyPixels(width, height, max_pixels // WEBP_SHARE, " for WebP")
            if max(width, height) > max_side and mime == "image/jpeg":
                # Decode at 1/2, 1/4 or 1/8 scale directly. The box must keep the aspect
                # ratio: Pillow picks the scale from the tighter side, so a square box
                # of max_side would decode a 6000x4000 photo at full size.
                image.draft(None, _fitted(width, height, max_side))
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


def _fitted(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The size with the long side at `max_side`, aspect ratio kept."""
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _downscaled(image: Image.Image, max_side: int) -> ReadyImage:
    has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    frame = _shrunk(image, max_side, "RGBA" if has_alpha else "RGB")
    frame.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    if has_alpha:
        frame.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        frame.save(out, format="JPEG", quality=85)
        mime = "image/jpeg"
    return ReadyImage(out.getvalue(), mime, frame.width, frame.height, downscaled=True)


STRIP_BYTES = 4 * 1024 * 1024  # what one strip's converted copy may take


def _shrunk(image: Image.Image, max_side: int, mode: str) -> Image.Image:
    """The (first) frame in `mode`, reduced by the whole factor that keeps its long side
    at or above `max_side`, converted and reduced a strip of rows at a time.

    Why strips: converting a whole 24-megapixel palette or RGBA image (to RGBA, or to the
    premultiplied form Pillow resizes in) is one more full-size copy, up to 96 MB; a
    strip's copy is a few MB and the result a quarter of the image or less."""
    width, height = image.size
    long_side = max(width, height)
    factor = max(1, long_side // max_side)
    if factor == 1 and image.mode == mode == "RGB":
        return image  # under twice max_side (a drafted JPEG): resized without a copy
    if factor == 1 and 2 * long_side > 3 * max_side:
        # Converting or premultiplying (alpha) at full size would be a second copy of up
        # to 16.7 megapixels; halving costs at most a quarter of max_side in resolution.
        factor = 2
    out = Image.new(mode, (-(-width // factor), -(-height // factor)))
    rows = factor * max(1, STRIP_BYTES // (4 * width * factor))  # a multiple of factor
    for top in range(0, height, rows):
        strip = image.crop((0, top, width, min(top + rows, height))).convert(mode)
        out.paste(strip.reduce(factor) if factor > 1 else strip, (0, top // factor))
    return out
