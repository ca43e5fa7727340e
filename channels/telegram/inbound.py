"""Telegram Update -> InboundMessage: who said what, where, and was it meant for the bot.

Why its own module: this is where Telegram's quirks live (UTF-16 entity offsets,
`/cmd@otherbot`, forum topics whose every message "replies" to the topic's first
message, anonymous admins posting as the group), and each quirk has a test. The result
is platform-neutral; the daemon never sees a python-telegram-bot object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from telegram import Chat, Message, MessageEntity, Update

from core.inject import clean_name
from core.messages import Attachment, ChatType, ImageRef, InboundMessage

PLATFORM = "telegram"

# (file_id, declared size or None, mime type, display name) -> ImageRef with a lazy fetch
ImageRefFactory = Callable[[str, int | None, str, str], ImageRef]
# (kind, file_id, declared size, mime, name, duration) -> Attachment with a lazy fetch
AttachmentFactory = Callable[[str, str, int | None, str | None, str, float | None], Attachment]

_UNSUPPORTED_MEDIA = (
    "sticker",
    "voice",
    "audio",
    "video",
    "video_note",
    "animation",
    "document",
    "location",
    "contact",
    "poll",
    "dice",
    "venue",
)


class BotIdentity(Protocol):
    """Who "the bot" is: PTB's Bot answers from the getMe it made at start."""

    @property
    def id(self) -> int: ...
    @property
    def username(self) -> str: ...


@dataclass(frozen=True)
class Skip:
    """An update the daemon does not get; `reason` is for the debug log."""

    reason: str


def normalise(
    update: Update,
    me: BotIdentity,
    *,
    answer_edited: bool,
    image_ref: ImageRefFactory,
    attachment_ref: AttachmentFactory | None = None,
) -> InboundMessage | Skip:
    """Turn one Update into an InboundMessage, or say why it is skipped."""
    edited = update.message is None and update.edited_message is not None
    msg = update.message or update.edited_message
    if msg is None:
        return Skip("not a message update")
    if edited and not answer_edited:
        return Skip("edited message (answer_edited = false)")
    chat_type = _chat_type(msg.chat)
    if chat_type is None:
        return Skip(f"chat type {msg.chat.type!r}")

    if msg.text is not None:
        text, entities = msg.text, msg.parse_entities()
    else:
        text, entities = msg.caption or "", msg.parse_caption_entities()
    images = _images(msg, image_ref)
    attachments = _attachments(msg, attachment_ref) if attachment_ref is not None else ()
    unreadable = not text.strip() and not images and not attachments
    if unreadable and not any(getattr(msg, kind, None) for kind in _UNSUPPORTED_MEDIA):
        return Skip("no text or image")

    command = _leading_command(entities)
    if command is not None:
        name, _, target = command.partition("@")
        if target:
            if target.casefold() != me.username.casefold():
                return Skip(f"command for another bot (@{target})")
            text = name + text[len(command) :]

    sender = _sender(msg)
    if sender is None:
        return Skip("no sender")
    sender_id, sender_name = sender

    reply = msg.reply_to_message
    if reply is not None and msg.is_topic_message and reply.forum_topic_created is not None:
        reply = None  # in a forum topic, the topic's first message is not a real reply
    reply_from = reply.from_user if reply is not None else None

    message_id = str(msg.message_id)
    if edited and msg.edit_date is not None:
        # a distinct id, so the daemon's duplicate filter does not drop the edit
        message_id = f"{message_id}:edit:{int(msg.edit_date.timestamp())}"
    when = msg.edit_date if edited and msg.edit_date is not None else msg.date

    return InboundMessage(
        platform=PLATFORM,
        chat_id=str(msg.chat.id),
        chat_type=chat_type,
        sender_id=sender_id,
        sender_name=sender_name,
        text=text,
        images=images,
        mentions_bot=_mentions(entities, me),
        reply_to_bot=reply_from is not None and reply_from.id == me.id,
        reply_to_sender_id=str(reply_from.id) if reply_from is not None else None,
        reply_to_message_id=str(reply.message_id) if reply is not None else None,
        message_id=message_id,
        thread_id=str(msg.message_thread_id)
        if msg.is_topic_message and msg.message_thread_id
        else None,
        timestamp=when,
        chat_title=clean_name(msg.chat.title) or None if chat_type is ChatType.GROUP else None,
        attachments=attachments,
        reply_text=(reply.text or reply.caption or None) if reply is not None else None,
        reply_attachments=_attachments(reply, attachment_ref)
        if reply is not None and attachment_ref is not None
        else (),
        unreadable=unreadable,  # a sticker, a poll: the dispatcher decides who is told
    )


def telegram_message_id(message_id: str) -> int:
    """Our message ids back to Telegram's integer (edits carry an `:edit:` suffix)."""
    return int(message_id.split(":", 1)[0])


def _chat_type(chat: Chat) -> ChatType | None:
    if chat.type == Chat.PRIVATE:
        return ChatType.PRIVATE
    if chat.type in (Chat.GROUP, Chat.SUPERGROUP):
        return ChatType.GROUP
    return None  # channels: the bot is not a participant there


def _sender(msg: Message) -> tuple[str, str] | None:
    if msg.sender_chat is not None:
        # an anonymous admin, or someone posting as a channel: the chat is the speaker
        chat = msg.sender_chat
        name = clean_name(chat.title) or clean_name(
            f"@{chat.username}" if chat.username else None, fallback=str(chat.id)
        )
        return str(chat.id), name
    who = msg.from_user
    if who is None:
        return None
    name = clean_name(who.full_name) or clean_name(
        f"@{who.username}" if who.username else None, fallback=str(who.id)
    )
    return str(who.id), name


def _leading_command(entities: dict[MessageEntity, str]) -> str | None:
    for ent, value in entities.items():
        if ent.type == MessageEntity.BOT_COMMAND and ent.offset == 0:
            return value
    return None


def _mentions(entities: dict[MessageEntity, str], me: BotIdentity) -> bool:
    handle = f"@{me.username}".casefold()
    for ent, value in entities.items():
        if ent.type == MessageEntity.MENTION and value.casefold() == handle:
            return True
        if ent.type == MessageEntity.TEXT_MENTION and ent.user is not None and ent.user.id == me.id:
            return True
    return False


def _images(msg: Message, image_ref: ImageRefFactory) -> tuple[ImageRef, ...]:
    refs: list[ImageRef] = []
    if msg.photo:
        best = max(msg.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        refs.append(
            image_ref(best.file_id, best.file_size, "image/jpeg", f"{best.file_unique_id}.jpg")
        )
    doc = msg.document
    if doc is not None and (doc.mime_type or "").startswith("image/"):
        name = clean_name(doc.file_name, fallback=doc.file_unique_id)
        refs.append(image_ref(doc.file_id, doc.file_size, doc.mime_type or "image/*", name))
    return tuple(refs)


def _attachments(msg: Message, make: AttachmentFactory) -> tuple[Attachment, ...]:
    """Voice notes, audio files and non-image documents, fetched only when read."""
    if msg.voice is not None:
        v = msg.voice
        name = f"{v.file_unique_id}.ogg"
        return (make("voice", v.file_id, v.file_size, v.mime_type, name, _seconds(v.duration)),)
    if msg.audio is not None:
        a = msg.audio
        name = clean_name(a.file_name, fallback=f"{a.file_unique_id}.mp3")
        return (make("audio", a.file_id, a.file_size, a.mime_type, name, _seconds(a.duration)),)
    doc = msg.document
    if doc is not None and not (doc.mime_type or "").startswith("image/"):
        name = clean_name(doc.file_name, fallback=doc.file_unique_id)
        return (make("document", doc.file_id, doc.file_size, doc.mime_type, name, None),)
    return ()


def _seconds(value: object) -> float | None:
    """PTB gives durations as int seconds or a timedelta, depending on its settings."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) if isinstance(value, int | float) else None
