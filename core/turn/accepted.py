"""An accepted message both ways: InboundMessage -> intake row, and back after a crash."""

from __future__ import annotations

from dataclasses import replace

from core.messages import (
    Attachment,
    ChatType,
    ImageRef,
    InboundMessage,
    OutboundMessage,
    Person,
    message_in,
    message_to,
)
from core.turn.delivery import ChannelRoutes
from memory.turns.types import IntakeDraft, IntakeEntry


def intake_draft(message: InboundMessage) -> IntakeDraft:
    """What must survive a crash to answer `message` again: no bytes, only locators."""
    images = [
        {"locator": ref.locator, "mime": ref.mime, "name": ref.name} for ref in message.images
    ]
    payload: dict[str, object] = {}
    if images:
        payload["images"] = images
    if message.reply_to_sender_id is not None:
        payload["reply_to_sender_id"] = message.reply_to_sender_id
    if message.attachments:
        payload["attachments"] = [_attachment_row(a) for a in message.attachments]
    if message.reply_text:
        payload["reply_text"] = message.reply_text
    return IntakeDraft(
        platform=message.platform,
        chat_id=message.chat_id,
        chat_type=message.chat_type.value,
        sender_id=message.sender_id,
        sender_name=message.sender_name,
        text=message.text,
        platform_message_id=message.message_id,
        thread_id=message.thread_id,
        payload=payload,
        received_at=message.timestamp,
    )


def restored_message(entry: IntakeEntry, routes: ChannelRoutes | None) -> InboundMessage:
    """The accepted message rebuilt for recovery; images come back through their channel."""
    images = tuple(_restore(entry, item, routes) for item in entry.payload.get("images", []))
    reply_to_sender = entry.payload.get("reply_to_sender_id")
    return message_in(
        entry,
        entry.sender_id,
        entry.sender_name,
        entry.text,
        images=images,
        attachments=tuple(
            _restore_attachment(entry, item, routes)
            for item in entry.payload.get("attachments", [])
            if isinstance(item, dict)
        ),
        reply_text=_str(entry.payload.get("reply_text")),
        reply_to_sender_id=str(reply_to_sender) if reply_to_sender is not None else None,
        message_id=entry.platform_message_id,
        timestamp=entry.received_at,
    )


def reply_for(message: InboundMessage, text: str, *, late: bool) -> OutboundMessage:
    """The reply: in a group (or when it comes late, after a restart) it quotes the message."""
    quote = (message.chat_type is ChatType.GROUP or late) and not message.scheduled
    quoting = message.message_id if quote else None
    return message_to(message, text, quoting=quoting, request_id=message.request_id)


def notice_for(message: InboundMessage, text: str, *, private: bool = False) -> OutboundMessage:
    """Our own answer to `message` (a command's, a notice): plain text, quoting it in a
    group; `private` asks for it in a DM with the sender (see OutboundMessage.private_to)."""
    answer = reply_for(message, text, late=False)
    in_group = message.chat_type is ChatType.GROUP
    to = Person(message.sender_id, message.sender_name) if private and in_group else None
    return replace(answer, plain=True, private_to=to)


def _restore(entry: IntakeEntry, item: dict[str, object], routes: ChannelRoutes | None) -> ImageRef:
    locator, mime, name = item.get("locator"), item.get("mime"), str(item.get("name") or "")
    found = None
    if isinstance(locator, str) and routes is not None:
        found = routes.restore_image(entry.platform, locator, _str(mime), name)
    return found or ImageRef(fetch=_gone, mime=_str(mime), name=name)


async def _gone() -> bytes:
    raise LookupError("it could not be fetched again after a restart")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _attachment_row(a: Attachment) -> dict[str, object]:
    return {
        "kind": a.kind,
        "locator": a.locator,
        "name": a.name,
        "mime": a.mime,
        "size": a.size,
        "duration_s": a.duration_s,
    }


def _restore_attachment(
    entry: IntakeEntry, item: dict[str, object], routes: ChannelRoutes | None
) -> Attachment:
    """A document or voice note rebuilt from its locator by its channel, else a stub
    whose fetch fails (the reader turns that into a note: "could not be fetched")."""
    kind = str(item.get("kind") or "document")
    size, duration = item.get("size"), item.get("duration_s")
    stub = Attachment(
        kind=kind,
        fetch=_gone,
        name=str(item.get("name") or ""),
        mime=_str(item.get("mime")),
        size=size if isinstance(size, int) else None,
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        locator=_str(item.get("locator")),
    )
    if routes is None or stub.locator is None:
        return stub
    return routes.restore_attachment(entry.platform, stub) or stub
