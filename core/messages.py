"""Platform-neutral message types: the only thing channels and core share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from memory.chats.types import InChat, person_key

# The message id of a scheduled task's turn (core/reminders/scheduler.py): no platform
# message has it, so its answer quotes nothing.
SCHEDULED_PREFIX = "schedule:"


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
class InboundMessage(InChat):
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
    # The replied-to message's documents, where the platform says (Telegram): `/kb add` as
    # a reply to a shared file reads it. Never stored, never read for a normal turn.
    reply_attachments: tuple[Attachment, ...] = ()
    # The channel's handle of a request still waiting for its answer (HTTP pairs each
    # request with the reply sent for it); never stored, so a recovered message has none.
    request_id: str | None = None
    # Facts for the dispatcher's notices (it decides whether anyone is told, and the
    # notice leaves through the one door like every answer):
    unreadable: bool = False  # nothing here the channel can read (a sticker, a poll)
    text_cut_at: int | None = None  # the text was cut to its first N characters
    # The sender's standing in a group as the platform reports it ("owner", "admin",
    # "member"; None: not said), read by the one admin decision (core/admins.py).
    sender_role: str | None = None
    reply_to_message_id: str | None = None  # the replied-to message (`/mod report` acts on it)
    # Not a message: the sender joined the group now (welcome, the newcomer's clock).
    joined: bool = False

    @property
    def sender_key(self) -> str:
        """Long-term memory is keyed by (platform, user)."""
        return person_key(self.platform, self.sender_id)

    @property
    def scheduled(self) -> bool:
        """A scheduled task's own turn (its id is ours, not a platform message's)."""
        return (self.message_id or "").startswith(SCHEDULED_PREFIX)


class StoredChat(Protocol):
    """A stored record's chat: an accepted message (IntakeEntry), a reminder."""

    @property
    def platform(self) -> str: ...

    @property
    def chat_id(self) -> str: ...

    @property
    def chat_type(self) -> str: ...

    @property
    def thread_id(self) -> str | None: ...


def message_in(
    where: StoredChat, sender_id: str, sender_name: str, text: str, **more: Any
) -> InboundMessage:
    """A message rebuilt in a stored chat (an accepted message after a restart, a
    reminder as its owner's message): the chat's address, kind and thread as stored."""
    return InboundMessage(
        platform=where.platform,
        chat_id=where.chat_id,
        chat_type=ChatType(where.chat_type),
        sender_id=sender_id,
        sender_name=sender_name,
        text=text,
        thread_id=where.thread_id,
        **more,
    )


@dataclass(frozen=True)
class Person:
    """Someone a message is for: the platform's user id and the name shown for them."""

    user_id: str
    name: str = ""


@dataclass(frozen=True)
class OutboundMessage:
    """Anything the bot sends (a reply, a command's answer, a notice, an apology, a
    reminder), handed to core/turn/delivery.py, which sends it through the chat's channel."""

    platform: str
    chat_id: str
    text: str
    reply_to_message_id: str | None = None
    thread_id: str | None = None
    # A channel's record of messages already showing this reply (a stream that died):
    # complete those instead of sending a second copy. See core/streaming.py.
    resume: dict[str, Any] | None = None
    # Address this person in a group (a Telegram mention, a QQ at), for a proactive
    # message such as a reminder that nobody in the chat just asked for.
    mention_user_id: str | None = None
    # A spoken version of `text` (OGG/Opus for Telegram, any format NapCat takes for QQ),
    # sent beside the text; a channel that cannot send audio sends the text alone.
    audio: bytes | None = None
    # A picture (PNG/JPEG bytes) with `text` as its caption; a channel that cannot show
    # pictures sends the text with a note instead (core/turn/delivery.py).
    image: bytes | None = None
    # A file (a sandbox run's output) sent as a document named `document_name`, `text` its
    # caption; a channel that cannot send files sends the text with a note instead.
    document: bytes | None = None
    document_name: str | None = None
    # The reminder (or scheduled task) this message delivers, for channels that report
    # it (the HTTP push body).
    reminder_id: int | None = None
    # The one occurrence it delivers (`reminder:<id>:<due, UTC>`, a job's `job:<id>`), the
    # same on every attempt: a receiver's idempotency key for a send repeated after a crash.
    occurrence_id: str | None = None
    # React to message `react_to` with this emoji instead of sending `text` (a one-emoji
    # answer, core/turn/reactions.py); a channel that cannot sends `text` instead.
    reaction: str | None = None
    react_to: str | None = None
    # Deliver in a private chat with this person instead, where the platform allows
    # (`/memory show` typed in a group); a channel that cannot says so in the chat.
    private_to: Person | None = None
    # Our own text (a command's answer, a notice): shown as written, not read as Markdown.
    plain: bool = False
    # The waiting request this answers (InboundMessage.request_id); None: nobody waits.
    request_id: str | None = None
    # Facts for the dispatcher's notices (it decides whether anyone is told, and the
    # notice leaves through the one door like every answer):
    unreadable: bool = False  # nothing here the channel can read (a sticker, a poll)
    text_cut_at: int | None = None  # the text was cut to its first N characters
    # Buttons under the message, each (label, command text): pressing one sends that
    # command as the person who pressed it. A channel without buttons sends the text
    # alone, so the text must name the commands too.
    choices: tuple[tuple[str, str], ...] = ()
    # The message whose `choices` this answer settles (a proposal decided): a channel
    # that shows buttons takes them off that message.
    settles: str | None = None


def message_to(
    where: StoredChat, text: str, *, quoting: str | None = None, **more: Any
) -> OutboundMessage:
    """A message into a chat (a reply, a reminder, a job's outcome): the chat's address
    and thread as `where` names them, quoting the platform message id `quoting` if any.
    The one builder, so every way out addresses a chat and its thread the same way."""
    return OutboundMessage(
        platform=where.platform,
        chat_id=where.chat_id,
        text=text,
        reply_to_message_id=quoting,
        thread_id=where.thread_id,
        **more,
    )


@dataclass(frozen=True)
class Reply:
    """What a command answers; the dispatcher sends it as an OutboundMessage.

    `private` asks for it in a DM with the sender where the platform allows (e.g.
    `/memory show` typed in a group); a channel that cannot, says so instead.
    """

    text: str
    private: bool = False
    choices: tuple[tuple[str, str], ...] = ()  # see OutboundMessage.choices
    # The choices on the message the command answered are decided (OutboundMessage.settles).
    settles: bool = False


class TryLater(Exception):
    """The message was taken in but is not answered now (the daemon is restarting).

    Raised by the message handler: a channel that answers in its response (HTTP) says
    503 with Retry-After; the others stay silent (the message is answered after the
    restart)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"try again in {retry_after_s:.0f}s")
        self.retry_after_s = retry_after_s


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
