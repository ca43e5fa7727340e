"""Images in messages: checked and downscaled, described by a vision model, or passed on.

The names are loaded on first use (PEP 562), so the parse child, which imports
core.media.documents, does not pay for the vision reader's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.media.vision import ImageNotes, VisionReader

__all__ = ["ImageNotes", "VisionReader"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from core.media import vision

        return getattr(vision, name)
    raise AttributeError(f"module 'core.media' has no attribute {name!r}")
