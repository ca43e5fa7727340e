"""A `POST /v1/chat` body, checked before anything else sees it.

Why a module of its own: what a caller may send (known fields only, bounded ids and
numbers, a text without NUL, a chat kind) is one job, apart from serving requests
(channels/http/channel.py). Every refusal is a RequestError whose text is safe to send back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from channels.http.chat_ids import is_own_chat, stored_group_id, stored_private_id
from core.inject import clean_name
from core.messages import ChatType, InboundMessage

PLATFORM = "http"
MAX_TEXT_CHARS = 16_000
MAX_ID_CHARS = 128
# json.loads turns a digit string into an int before anyone can check its length (and
# over 4,300 digits Python refuses with a ValueError); ids are at most MAX_ID_CHARS.
MAX_NUMBER_CHARS = MAX_ID_CHARS
_FIELDS = {
    "user_id",
    "chat_id",
    "chat_type",
    "sender_name",
    "text",
    "message_id",
    "mentions_bot",
    "reply_to_bot",
}


class RequestError(Exception):
    """A refusal the caller caused; its text is safe to send back."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class ChatRequest:
    """A validated `POST /v1/chat` body; `chat_id` as the caller named it (the user's id
    for their own private chat), `stored_chat_id` as the daemon keeps it."""

    user_id: str
    chat_id: str
    chat_type: ChatType
    sender_name: str
    text: str
    message_id: str | None = None
    mentions_bot: bool = False
    reply_to_bot: bool = False

    @property
    def own_chat(self) -> bool:
        """The sender's own private chat (no other user can name it)."""
        return self.chat_type is ChatType.PRIVATE and is_own_chat(self.user_id, self.chat_id)

    @property
    def stored_chat_id(self) -> str:
        """Kinds kept apart: a group never shares an id with a person's chat or a thread."""
        if self.chat_type is ChatType.GROUP:
            return stored_group_id(self.chat_id)
        return stored_private_id(self.user_id, self.chat_id)

    def to_inbound(self, request_id: str | None = None) -> InboundMessage:
        return InboundMessage(
            platform=PLATFORM,
            chat_id=self.stored_chat_id,
            chat_type=self.chat_type,
            sender_id=self.user_id,
            sender_name=self.sender_name,
            text=self.text,
            message_id=scoped_message_id(self.user_id, self.message_id),
            mentions_bot=self.mentions_bot,
            reply_to_bot=self.reply_to_bot,
            request_id=request_id,
        )


def scoped_message_id(user_id: str, message_id: str | None) -> str | None:
    """The stored message id: the caller's id scoped to its sender.

    Why: the daemon treats (platform, chat, message id) as one message (a repeat is
    answered once, with the first answer). HTTP callers choose their ids freely, so two
    users in one group may both send "1"; scoped, Bob's "1" is his own message, never a
    repeat of Alice's (nor an answer with her reply). The sender is a 64-bit digest so
    the key fits the 128-character column (a long id is digested with it).
    """
    if message_id is None:
        return None
    user = hashlib.blake2b(user_id.encode(), digest_size=8, person=b"chatterd-http")
    scoped = f"{message_id}~{user.hexdigest()}"
    if len(scoped) <= MAX_ID_CHARS:
        return scoped
    both = hashlib.blake2b(f"{user_id}\x00{message_id}".encode(), digest_size=16)
    return f"~{both.hexdigest()}"


def parse_chat_request(body: bytes) -> ChatRequest:
    """Validate a request body; raise RequestError(400/413) naming what is wrong."""
    try:
        data = json.loads(body, parse_int=_bounded_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(400, f"body is not valid JSON: {_short(exc)}") from None
    except ValueError:  # e.g. a number Python will not convert; never a 500
        raise RequestError(400, "body is not valid JSON: a value cannot be read") from None
    except RecursionError:
        raise RequestError(400, "body is not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise RequestError(400, "body must be a JSON object")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise RequestError(400, f"unknown field(s): {', '.join(unknown)}")

    user_id = _id_field(data, "user_id", required=True)
    assert user_id is not None
    chat_type_raw = data.get("chat_type")
    if chat_type_raw is None:
        raise RequestError(400, "missing field: chat_type")
    if chat_type_raw not in ("private", "group"):
        raise RequestError(400, 'chat_type must be "private" or "group"')
    chat_type = ChatType(chat_type_raw)
    # A private chat_id other than the user's own names a thread, bound to its first user
    # (HttpChannel checks the binding before the message is accepted).
    chat_id = _id_field(data, "chat_id", required=chat_type is ChatType.GROUP)
    text = data.get("text")
    if text is None:
        raise RequestError(400, "missing field: text")
    if not isinstance(text, str):
        raise RequestError(400, "text must be a string")
    if len(text) > MAX_TEXT_CHARS:
        raise RequestError(413, f"text is longer than {MAX_TEXT_CHARS} characters")
    text = clean_text(text)
    if not text.strip():
        raise RequestError(400, "text is empty")
    sender_name = data.get("sender_name")
    if sender_name is not None and not isinstance(sender_name, str):
        raise RequestError(400, "sender_name must be a string")
    return ChatRequest(
        user_id=user_id,
        chat_id=chat_id or user_id,
        chat_type=chat_type,
        sender_name=clean_name(sender_name, fallback=user_id),
        text=text,
        message_id=_id_field(data, "message_id", required=False),
        mentions_bot=_bool_field(data, "mentions_bot"),
        reply_to_bot=_bool_field(data, "reply_to_bot"),
    )


def _bounded_int(digits: str) -> int:
    """json.loads' parse_int: refuse an over-long number before converting it."""
    if len(digits) > MAX_NUMBER_CHARS:
        raise RequestError(400, f"a number is longer than {MAX_NUMBER_CHARS} digits")
    return int(digits)


def clean_text(text: str) -> str:
    """Drop what no store can hold: NUL (PostgreSQL refuses it) and lone surrogates."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _id_field(data: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise RequestError(400, f"missing field: {key}")
        return None
    # Integrations often hold numeric ids; accept them, but not floats or booleans.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RequestError(400, f"{key} must be a string or an integer")
    text = str(value)
    if not text.strip() or len(text) > MAX_ID_CHARS or not text.isprintable():
        raise RequestError(400, f"{key} must be 1-{MAX_ID_CHARS} printable characters")
    return text


def _bool_field(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise RequestError(400, f"{key} must be true or false")
    return value


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120]
