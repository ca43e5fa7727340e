"""What a message carries, read for the model: its text with the sender's name, and the
notes its images, links, documents and voice add.

A burst reads each of its messages the same way before they become one turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core.inject import inject
from core.media.attachments import SharedNotes
from core.media.vision import NOT_DESCRIBED, ImageNotes
from core.messages import InboundMessage

# Turns images into "(Image N: ...)" notes, optional passthrough parts, and content hashes.
ImageReader = Callable[[InboundMessage], Awaitable[ImageNotes]]
# Links, documents, voice -> notes for this turn and shorter ones to store (core/media/).
SharedMaterialReader = Callable[[InboundMessage], Awaitable[SharedNotes]]


@dataclass(frozen=True)
class ReadMessage:
    """One message made ready for the model: its content for this turn, the shorter
    content stored with its turn, and what its images and files add."""

    content: str
    stored: str
    meta: dict[str, object]
    image_parts: list[dict[str, object]]
    spoken: bool


def first_images(messages: Sequence[InboundMessage]) -> list[int]:
    """Each message's first image number when they are one turn: 1, then after the
    images of the messages before it."""
    firsts, seen = [], 0
    for message in messages:
        firsts.append(seen + 1)
        seen += len(message.images)
    return firsts


class MessageReading:
    """Reads messages with the daemon's image and shared-material readers (None: off)."""

    def __init__(
        self,
        read_images: ImageReader | None = None,
        read_shared: SharedMaterialReader | None = None,
    ) -> None:
        self._read_images = read_images
        self._read_shared = read_shared

    async def read(self, message: InboundMessage, suffix: str, first_image: int = 1) -> ReadMessage:
        """A message's content with its image, document, link and voice notes. In this
        turn's content its images are numbered from `first_image` (a burst's current
        message numbers them across its messages, in the order their image parts go to
        the model); the stored turn, which stands alone, numbers its own from 1."""
        images = await self._images(message)
        shared = await self._read_shared(message) if self._read_shared else SharedNotes()
        say = (message.sender_name, message.sender_id, message.text, images.notes)
        meta: dict[str, object] = {"images": images.hashes} if images.hashes else {}
        meta.update(shared.meta)
        return ReadMessage(
            content=inject(*say, suffix, shared.notes, first_image=first_image),
            # Stored: the short notes (later turns keep "sent report.pdf", not its text).
            stored=inject(*say, suffix, shared.short),
            meta=meta,
            image_parts=list(images.parts),
            spoken=shared.spoken,
        )

    async def _images(self, message: InboundMessage) -> ImageNotes:
        if not message.images:
            return ImageNotes()
        if self._read_images is None:
            return ImageNotes(notes=[NOT_DESCRIBED] * len(message.images))
        return await self._read_images(message)
