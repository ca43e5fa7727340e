"""Images in messages: checked and downscaled, described by a vision model, or passed on."""

from core.media.vision import ImageNotes, VisionReader

__all__ = ["ImageNotes", "VisionReader"]
