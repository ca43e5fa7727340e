"""Which OneBot connections are live, by account, and which one a chat's reply takes.

Why a registry of its own: connections come and go (reverse and forward mode, a
reconnect, a second account), the account a connection speaks for may only be learned
from its first frame, and a newer connection for the same account must replace the
older one. Inbound events and outbound sends both ask this one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from cachetools import LRUCache

from channels.onebot.actions import OneBotError
from channels.onebot.transport import CLOSE_REPLACED, OneBotConnection

log = logging.getLogger(__name__)

_RECENT_CHATS = 4096

Spawn = Callable[[Coroutine[Any, Any, object]], None]


class OneBotUnavailable(OneBotError):
    """No implementation is connected for the account, so nothing can be sent."""


class ConnectionRegistry:
    """Live connections by account key: the QQ number, or a temporary key until known."""

    def __init__(self, spawn: Spawn) -> None:
        self._spawn = spawn
        self._by_key: dict[str, OneBotConnection] = {}
        # Recent chats only, least recently used first out: never unbounded.
        self._routes: LRUCache[str, str] = LRUCache(_RECENT_CHATS)  # chat id -> account

    @staticmethod
    def key_of(conn: OneBotConnection) -> str:
        return conn.self_id or f"?{id(conn)}"

    def all(self) -> list[OneBotConnection]:
        return list(self._by_key.values())

    @property
    def accounts(self) -> list[str]:
        """QQ numbers of the accounts connected right now."""
        return sorted(c.self_id for c in self._by_key.values() if c.self_id and not c.closed)

    async def register(self, conn: OneBotConnection) -> None:
        key = self.key_of(conn)
        old = self._by_key.get(key)
        self._by_key[key] = conn
        if old is not None and old is not conn:
            log.info("onebot[%s]: new connection replaces the old one", key)
            await old.close("replaced by a newer connection", code=CLOSE_REPLACED)

    def forget(self, conn: OneBotConnection) -> None:
        for key, known in list(self._by_key.items()):
            if known is conn:
                del self._by_key[key]

    def adopt_self_id(self, conn: OneBotConnection, self_id: str) -> None:
        """Forward mode (or a missing X-Self-ID) learns the account from the first frame."""
        if conn.self_id == self_id:
            return
        conn.self_id, conn.label = self_id, f"[{self_id}]"
        self.forget(conn)
        old = self._by_key.get(self_id)
        self._by_key[self_id] = conn
        if old is not None and old is not conn:
            self._spawn(old.close("replaced by a newer connection", code=CLOSE_REPLACED))

    def note_route(self, chat_id: str, account: str) -> None:
        """The account that saw a message from `chat_id` is the one to answer it."""
        self._routes[chat_id] = account

    def account_for(self, chat_id: str) -> str:
        """The account to answer `chat_id`: the one that saw it, else any live one."""
        live = [key for key, conn in self._by_key.items() if not conn.closed]
        preferred = self._routes.get(chat_id)
        if preferred in live:
            return str(preferred)
        if live:
            return live[-1]
        raise OneBotUnavailable("no OneBot implementation is connected")

    def live(self, account: str) -> OneBotConnection:
        """The account's connection now (it may have been replaced since the send queued)."""
        conn = self._by_key.get(account)
        if conn is None or conn.closed:
            raise OneBotUnavailable(f"account {account} is not connected")
        return conn
