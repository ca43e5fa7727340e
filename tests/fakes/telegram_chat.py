"""What a Telegram chat holds and refuses, for the fake Bot API (telegram_server.py).

Why a model of the chat and not just a call log: a streamed reply is judged by what the
user finally sees (`visible(chat)`: the bot's messages after every edit and delete), and
by the limits Telegram enforces: entity offsets in UTF-16 units that must make sense
(strict, as the real server: a bad entity is "can't parse entities"), 4,096 units per
message, and, when switched on, 429 past N sends+edits a minute per chat, with
`retry_after` saying when the window frees. Time is read from an injected clock so the
rate window runs in the same virtual time as the channel under test.

Scripting (on FakeTelegram)::

    tg.limit_per_chat(20)           # sendMessage + editMessageText: 429 past 20/min/chat
    tg.refuse_entities()            # any request with entities: 400 can't parse entities
    tg.refuse_drafts()              # sendMessageDraft: 404, as an older Bot API server
    tg.visible(chat_id)             # [{"message_id", "text", "entities"}] as the user sees
    tg.delete_by_user(chat_id, message_id)
    await tg.wait_until(lambda: ...)  # checked after every call and answer
    tg.drafts, tg.edits, tg.reactions, tg.deleted
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

_ENTITY_TYPES = frozenset(
    {
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "url",
        "email",
        "phone_number",
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "blockquote",
        "expandable_blockquote",
        "code",
        "pre",
        "text_link",
        "text_mention",
        "custom_emoji",
    }
)
RATE_WINDOW_S = 60.0


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of `text`."""
    data = text.encode("utf-16-le")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def entity_error(text: str, entities: Any) -> str | None:
    """Why Telegram would refuse these entities for `text`, or None."""
    if not isinstance(entities, list):
        return "entities must be a list"
    units = utf16_units(text)
    for entity in entities:
        if not isinstance(entity, dict) or entity.get("type") not in _ENTITY_TYPES:
            return f"unknown entity {entity!r}"
        offset, length = entity.get("offset"), entity.get("length")
        if not isinstance(offset, int) or not isinstance(length, int):
            return f"entity without offset/length {entity!r}"
        if offset < 0 or length <= 0 or offset + length > len(units):
            return f"entity {entity!r} is outside the text ({len(units)} units)"
        for edge in (offset, offset + length):
            if edge < len(units) and 0xDC00 <= units[edge] <= 0xDFFF:
                return f"entity {entity!r} splits a character"
        if entity["type"] == "text_link" and not str(entity.get("url") or "").startswith(
            ("http://", "https://", "tg://", "mailto:")
        ):
            return f"entity {entity!r} has a bad url"
    return None


def utf16_len(text: str) -> int:
    """Telegram entity offsets and lengths count UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class ChatModel:
    """Messages, drafts, reactions and limits of the fake's chats; mixed into FakeTelegram."""

    def _init_chats(self, clock: Callable[[], float]) -> None:
        self.now = clock
        self.drafts: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.reactions: list[dict[str, Any]] = []
        self.deleted: list[tuple[int, int]] = []
        self.rate_limited: list[dict[str, Any]] = []  # the calls answered 429
        self._stored: dict[int, dict[int, dict[str, Any]]] = {}
        self._per_minute: int | None = None
        self._window: dict[int, deque[float]] = {}
        self._accepted: dict[int, list[float]] = {}
        self._refuse_entities = False
        self._refuse_drafts = False

    # -- scripting -------------------------------------------------------------------

    def limit_per_chat(self, per_minute: int | None) -> None:
        """sendMessage/editMessageText past `per_minute` a minute in one chat: 429."""
        self._per_minute = per_minute

    def refuse_entities(self, on: bool = True) -> None:
        self._refuse_entities = on

    def refuse_drafts(self, on: bool = True) -> None:
        self._refuse_drafts = on

    def delete_by_user(self, chat_id: int, message_id: int) -> None:
        """Someone deleted one of the bot's messages (edits to it now fail)."""
        self._unstore(chat_id, message_id)

    def visible(self, chat_id: int) -> list[dict[str, Any]]:
        """The bot's messages in the chat as a user sees them now, oldest first."""
        stored = self._stored.get(chat_id, {})
        return [stored[message_id] | {"message_id": message_id} for message_id in sorted(stored)]

    def paced_calls(self, chat_id: int) -> list[float]:
        """When each accepted sendMessage/editMessageText to the chat arrived."""
        return list(self._accepted.get(chat_id, ()))

    # -- checks used by the handlers -------------------------------------------------

    def _refusal(self, params: dict[str, Any]) -> str | None:
        """A 400 description for the text and entities of a send/edit, or None."""
        entities = params.get("entities")
        if entities is None:
            return None
        if self._refuse_entities:
            return "Bad Request: can't parse entities: unsupported entity"
        problem = entity_error(str(params.get("text") or ""), entities)
        return f"Bad Request: can't parse entities: {problem}" if problem else None

    def _over_limit(self, chat_id: int, method: str) -> int | None:
        """retry_after when this chat is over its per-minute limit (the refusal is kept
        in `rate_limited`), else None (the call is counted)."""
        now = self.now()
        window = self._window.setdefault(chat_id, deque())
        while window and window[0] <= now - RATE_WINDOW_S:
            window.popleft()
        if self._per_minute is not None and len(window) >= self._per_minute:
            retry_after = max(1, math.ceil(window[0] + RATE_WINDOW_S - now))
            self.rate_limited.append(
                {
                    "method": method,
                    "chat_id": chat_id,
                    "at": now,
                    "retry_after": retry_after,
                    "call": getattr(self, "_current_call", None),
                }
            )
            return retry_after
        window.append(now)
        self._accepted.setdefault(chat_id, []).append(now)
        return None

    def _store(self, chat_id: int, message_id: int, params: dict[str, Any]) -> None:
        self._stored.setdefault(chat_id, {})[message_id] = {
            "text": str(params.get("text")),
            "entities": params.get("entities") or [],
        }

    def _stored_message(self, chat_id: int, message_id: Any) -> dict[str, Any] | None:
        if not isinstance(message_id, int):
            return None
        return self._stored.get(chat_id, {}).get(message_id)

    def _unstore(self, chat_id: int, message_id: int) -> bool:
        return self._stored.get(chat_id, {}).pop(message_id, None) is not None

    # -- the API methods of a chat's messages ------------------------------------------

    async def _api_editMessageText(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        chat_id, message_id, text = (
            params.get("chat_id"),
            params.get("message_id"),
            params.get("text"),
        )
        if not isinstance(chat_id, int):
            return api_error(400, "Bad Request: chat not found")
        current = self._stored_message(chat_id, message_id)
        if current is None:
            return api_error(400, "Bad Request: message to edit not found")
        if not text or not str(text).strip():
            return api_error(400, "Bad Request: message text is empty")
        if utf16_len(str(text)) > 4096:
            return api_error(400, "Bad Request: message is too long")
        refusal = self._refusal(params)
        if refusal is not None:
            return api_error(400, refusal)
        if current["text"] == str(text) and current["entities"] == (params.get("entities") or []):
            return api_error(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        if (retry_after := self._over_limit(chat_id, "editMessageText")) is not None:
            return api_error(429, f"Too Many Requests: retry after {retry_after}", retry_after)
        self.edits.append(params)
        self._store(chat_id, message_id, params)
        return api_ok(
            {
                "message_id": message_id,
                "date": int(time.time()),
                "edit_date": int(time.time()),
                "chat": self._chats.get(chat_id) or {"id": chat_id, "type": "supergroup"},
                "from": self.bot_user,
                "text": str(text),
            }
        )

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        if self._refuse_drafts:
            return api_error(404, "Not Found")
        chat_id, draft_id, text = params.get("chat_id"), params.get("draft_id"), params.get("text")
        if not isinstance(chat_id, int) or chat_id <= 0:
            return api_error(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if not isinstance(draft_id, int) or draft_id == 0:
            return api_error(400, "Bad Request: draft_id must be non-zero")
        if utf16_len(str(text or "")) > 4096:
            return api_error(400, "Bad Request: message is too long")
        refusal = self._refusal(params)
        if refusal is not None:
            return api_error(400, refusal)
        self.drafts.append(params)
        return api_ok(True)

    async def _api_deleteMessage(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        chat_id, message_id = params.get("chat_id"), params.get("message_id")
        if not isinstance(chat_id, int) or not isinstance(message_id, int):
            return api_error(400, "Bad Request: message to delete not found")
        if not self._unstore(chat_id, message_id):
            return api_error(400, "Bad Request: message to delete not found")
        self.deleted.append((chat_id, message_id))
        return api_ok(True)

    async def _api_setMessageReaction(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        reaction = params.get("reaction") or []
        if not isinstance(reaction, list):
            return api_error(400, "Bad Request: REACTION_INVALID")
        self.reactions.append(params | {"reaction": reaction})
        return api_ok(True)


def api_ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def api_error(code: int, description: str, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=code)
