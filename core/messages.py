"""Platform-neutral message types: the only thing channels and core share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class ChatType(StrEnum):
    PRIVATE = "private"
    GROUP = "group"


ImageFetcher = Callable[[], Awaitable[bytes]]


@dataclass(frozen=True)
class ImageRef:
    """An image attached to a message; bytes are fetched lazily, only if needed.

    `locator` is a plain string the channel can turn back into an ImageRef after a
    restart (a Telegram file_id, a QQ image URL), so an accepted message whose images
    were not yet described can still be answered by recovery.
    """

    fetch: ImageFetcher
    mime: str | None = None
    name: str = ""
    locator: str | None = None


@dataclass(frozen=True)
class Attachment:
    """A file a message carries besides images: a document, a voice note, an audio file.

    Like ImageRef, bytes are fetched lazily (most group messages are never read) and
    `locator` lets the channel rebuild it after a restart. `size` and `duration_s` are
    what the platform declared, checked before anything is downloaded.
    """

    kind: str  # "document" | "voice" | "audio"
    fetch: ImageFetcher
    name: str = ""
    mime: str | None = None
    size: int | None = None
    duration_s: float | None = None
    locator: str | None = None


@dataclass(frozen=True)
class InboundMessage:
    """One message as a channel saw it, before any policy is applied."""

    platform: str
    chat_id: str
    chat_type: ChatType
    sender_id: str
    sender_name: str
    text: str
    images: tuple[ImageRef, ...] = ()
    mentions_bot: bool = False
    reply_to_bot: bool = False
    reply_to_sender_id: str | None = None
    message_id: str | None = None
    thread_id: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    chat_title: str | None = None  # a group's name where the platform says it (console)
    attachments: tuple[Attachment, ...] = ()  # documents, voice notes, audio
    reply_text: str | None = None  # the replied-to message's text (its links are read too)

    @property
    def chat_key(self) -> str:
        """History is keyed by (platform, chat)."""
        return f"{self.platform}:{self.chat_id}"

    @property
    def sender_key(self) -> str:
        """Long-term memory is keyed by (platform, user)."""
        return f"{self.platform}:{self.sender_id}"


@dataclass(frozen=True)
class OutboundMessage:
    """A reply on its way back through the channel it came from."""

    platform: str
    chat_id: str
    text: str
    reply_to_message_id: str | None = None
    thread_id: str | None = None
    # A channel's record of messages already showing this reply (a stream that died):
    # complete those instead of sending a second copy. See core/streaming.py.
    resume: dict[str, Any] | None = None
    # Address this person in a group (a Telegram mention, a QQ at): a proactive message
    # such as a reminder, sent when nobody in the chat asked for it at that moment.
    mention_user_id: str | None = None
    # A spoken version of `text` (OGG/Opus for Telegram, any format NapCat takes for QQ),
    # sent beside the text; a channel that cannot send audio sends the text alone.
    audio: bytes | None = None
    # The reminder (or scheduled task) this message delivers, for channels that report
    # it (the HTTP push body).
    reminder_id: int | None = None


@dataclass(frozen=True)
class Reply:
    """What the daemon answers to one inbound message.

    `retry_after_s` means the message was taken in but cannot be answered now (the
    daemon is restarting); a channel that answers in its response (HTTP) says 503 with
    Retry-After, the others stay silent (the message is answered after the restart).

    `private` asks the channel to deliver it in a DM with the sender where the platform
    allows (e.g. `/memory show` typed in a group); a channel that cannot, says so instead.
    """

    text: str
    private: bool = False
    retry_after_s: float | None = None  # not answered now: the sender should try again


@dataclass(frozen=True)
class Sent:
    """What a channel confirms it delivered: the platform's ids of the sent messages."""

    message_ids: tuple[str, ...] = ()


class TooLarge(Exception):
    """Refused by a size limit before it was read whole (a file over the byte cap)."""


class DeliveryError(Exception):
    """A reply the channel could not hand to the platform; the turn stays `answered`.

    str(exc) is for the operator log and carries no secrets. `permanent`: it can never
    be delivered (a chat id the platform cannot address, a user who blocked the bot), so
    the message is settled `failed` at once instead of being retried by every sweep.
    """

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.permanent = permanent
