"""OneBot v11 message events -> InboundMessage, plus the small id helpers around them.

Kept apart from the channel so the mapping (who is the sender, what is the chat, what
does the body say) is one pure function: frame in, message out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from channels.onebot.message import FileSegment, ParsedMessage, interpret, normalize_message
from core.inject import clean_name
from core.messages import Attachment, ChatType, ImageRef, InboundMessage

ImageRefFactory = Callable[[str, str], ImageRef]  # (url, file name) -> lazy image
FileRefFactory = Callable[[FileSegment], Attachment]  # a file or record -> lazy attachment


class InvalidEvent(ValueError):
    """A message event missing what every message must have, or with ids we cannot use."""


# QQ numbers (users, groups, accounts) are positive and fit in a signed 64-bit integer;
# message ids are 32-bit on every implementation we know (go-cqhttp's may be negative),
# some send them as strings. Anything else (a float, a dict, -42, 300 characters) is
# refused at the edge: it could never be answered, and would only make a poison row.
_MAX_ID = 2**63 - 1
MAX_ID_CHARS = 64


def qq_number(value: Any) -> str | None:
    """A user, group or account number as text; None when `value` is not a sane one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if 0 < value <= _MAX_ID else None
    if isinstance(value, str) and 0 < len(value) <= 19 and value.isascii() and value.isdigit():
        return value if 0 < int(value) <= _MAX_ID else None
    return None


def message_id_of(value: Any) -> str | None:
    """A message id as text; None when `value` is not a sane one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if -_MAX_ID <= value <= _MAX_ID else None
    if (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_CHARS
        and value.isascii()
        and value.isprintable()
        and not any(c.isspace() for c in value)
    ):
        return value
    return None


DEFAULT_MAX_TEXT_CHARS = 8000


def cut_text(text: str, limit: int) -> str:
    """The start of an over-long message and a note the model reads; short text as is."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…(message cut: only its first {limit} of {len(text)} characters kept)"


def keep_chars_for(max_text_chars: int) -> int:
    """What an oversized frame keeps of each string (transport.py's `cut_strings`): twice
    the text read, so escapes (a newline, `\\uXXXX`) rarely leave less than that."""
    return 2 * max_text_chars + 64


def oversize_text(text: str, limit: int, size: int) -> tuple[str, int]:
    """The start of a message read from a frame over the cap, the note the model reads,
    and how many characters were kept (`text_cut_at`)."""
    kept = min(limit, len(text))
    mib = size / 2**20
    note = f"…(message cut: only its first {kept} characters of a {mib:.1f} MiB message kept)"
    return f"{text[:kept]}\n{note}", kept


def to_inbound(
    frame: dict[str, Any],
    self_id: str | None,
    image_ref: ImageRefFactory,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    file_ref: FileRefFactory | None = None,
    *,
    oversize: int | None = None,
) -> tuple[InboundMessage, ParsedMessage] | None:
    """Map one `post_type: message` event. None for the bot's own messages. `oversize`:
    the frame was that many bytes, over the cap, and read with its long strings cut.

    reply_to_bot / reply_to_sender_id stay unset: finding the replied message's author
    may need an action round trip, which the channel does (see `with_reply`).
    """
    user_id, kind = frame.get("user_id"), frame.get("message_type")
    if user_id is None or kind not in ("group", "private"):
        raise InvalidEvent("no user_id or unknown message_type")
    sender_id = qq_number(user_id)
    if sender_id is None:
        raise InvalidEvent(f"user_id is not a QQ number ({_shown(user_id)})")
    message_id = frame.get("message_id")
    if message_id is not None and message_id_of(message_id) is None:
        raise InvalidEvent(f"message_id is not a usable id ({_shown(message_id)})")
    if self_id is not None and sender_id == self_id:
        return None
    if kind == "group":
        if frame.get("group_id") is None:
            raise InvalidEvent("group message without group_id")
        group_id = qq_number(frame["group_id"])
        if group_id is None:
            raise InvalidEvent(f"group_id is not a QQ group number ({_shown(frame['group_id'])})")
        chat_id, chat_type = f"group:{group_id}", ChatType.GROUP
    else:
        chat_id, chat_type = f"private:{sender_id}", ChatType.PRIVATE
    segments = normalize_message(frame.get("message"))
    if not segments and isinstance(frame.get("raw_message"), str):
        segments = normalize_message(frame["raw_message"])
    parsed = interpret(segments, self_id)
    if parsed.reply_to is not None and message_id_of(parsed.reply_to) is None:
        parsed = replace(parsed, reply_to=None)  # a quote of nothing we could look up
    text = cut_text(parsed.text, max_text_chars)
    cut_at = max_text_chars if len(parsed.text) > max_text_chars else None
    if oversize is not None and parsed.text:
        text, cut_at = oversize_text(parsed.text, max_text_chars, oversize)
    message = InboundMessage(
        platform="qq",
        chat_id=chat_id,
        chat_type=chat_type,
        sender_id=sender_id,
        sender_name=display_name(frame, sender_id, group=chat_type is ChatType.GROUP),
        text=text,
        text_cut_at=cut_at,
        # Over the cap with no text (inline media): nothing of it can be read.
        unreadable=oversize is not None and not (parsed.text or parsed.files or parsed.images),
        images=tuple(image_ref(img.url, img.file) for img in parsed.images),
        mentions_bot=parsed.mentions_self,
        message_id=message_id_of(message_id),
        timestamp=timestamp(frame.get("time")),
        attachments=tuple(file_ref(f) for f in parsed.files) if file_ref is not None else (),
        sender_role=sender_role(frame) if chat_type is ChatType.GROUP else None,
        reply_to_message_id=parsed.reply_to,
    )
    return message, parsed


ROLES = ("owner", "admin", "member")


def sender_role(frame: dict[str, Any]) -> str | None:
    """A group member's `sender.role` (owner, admin, member); None when it says none."""
    sender = frame.get("sender")
    role = sender.get("role") if isinstance(sender, dict) else None
    return role if role in ROLES else None


def member_joined(
    frame: dict[str, Any], self_id: str | None, name: str | None
) -> InboundMessage | None:
    """A `notice` / `group_increase` event as a joined member (not a message); None for
    the bot's own joining or an event without usable numbers."""
    user, group = qq_number(frame.get("user_id")), qq_number(frame.get("group_id"))
    if user is None or group is None or user == self_id:
        return None
    return InboundMessage(
        platform="qq",
        chat_id=f"group:{group}",
        chat_type=ChatType.GROUP,
        sender_id=user,
        sender_name=clean_name(name or "") or user,
        text="",
        timestamp=timestamp(frame.get("time")),
        joined=True,
    )


def _shown(value: Any) -> str:
    """What the log line says about a bad id: its type and a short prefix, never all of it."""
    text = repr(value)
    return f"{type(value).__name__} {text[:24]}{'…' if len(text) > 24 else ''}"


def with_reply(
    message: InboundMessage,
    target: str | None,
    self_id: str | None,
    quoted_text: str | None = None,
) -> InboundMessage:
    """Fill in whom the message replies to, whether that was the bot, and what it said."""
    return replace(
        message,
        reply_to_sender_id=target,
        reply_to_bot=target is not None and self_id is not None and target == self_id,
        reply_text=quoted_text or message.reply_text,
    )


def display_name(frame: dict[str, Any], sender_id: str, *, group: bool) -> str:
    """Group card, else nickname, else the QQ number — cleaned of control/bidi tricks."""
    raw_sender = frame.get("sender")
    sender: dict[str, Any] = raw_sender if isinstance(raw_sender, dict) else {}
    candidates: list[Any] = []
    anonymous = frame.get("anonymous")
    if group and isinstance(anonymous, dict):
        candidates.append(anonymous.get("name"))
    if group:
        candidates.append(sender.get("card"))
    candidates.append(sender.get("nickname"))
    for raw in candidates:
        if isinstance(raw, str):
            name = clean_name(raw)
            if name:
                return name
    return sender_id


def timestamp(value: Any) -> datetime:
    """Event `time` is Unix seconds; anything unusable means "now"."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            pass
    return datetime.now(UTC)


def parse_chat_id(chat_id: str) -> tuple[str, str]:
    """`group:<n>` / `private:<n>` -> (kind, number); anything else is a caller bug."""
    kind, _, number = chat_id.partition(":")
    if kind not in ("group", "private") or not number.isdigit():
        raise ValueError(f"not a QQ chat id (group:<n> or private:<n>): {chat_id!r}")
    return kind, number


def id_param(value: str) -> int | str:
    """OneBot ids are numbers on the wire; keep anything else as the string we got."""
    return int(value) if value.removeprefix("-").isdigit() else value
