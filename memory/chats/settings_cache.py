"""Chat settings on the message path: a short-lived cache in front of ChatSettingsStore.

Why: every group message asks for its chat's settings (access, on/off, wake words) and
every answered turn for its persona; a database read each time would double the reads
of a busy group for values that change a few times a month. Entries live `ttl_s`
seconds, so a change made on another replica (or straight in the database) is seen here
within that time; a change made through this object is seen here at once, because it
writes through and keeps the stored result.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from memory.chats.settings import Change, ChatSettings, ChatSettingsStore
from memory.chats.types import ChatKey

DEFAULT_TTL_S = 5.0
DEFAULT_MAX_CHATS = 10_000
WARM_PAGE = 500


class CachedChatSettings:
    """The store's read and write methods, reads answered from memory for `ttl_s`.

    Bounded: at most `max_chats` chats are kept, the least recently used go first.
    """

    def __init__(
        self,
        store: ChatSettingsStore,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_chats: int = DEFAULT_MAX_CHATS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s < 0 or max_chats < 1:
            raise ValueError("ttl_s must be >= 0 and max_chats >= 1")
        self.store = store
        self.ttl_s = ttl_s
        self._max = max_chats
        self._clock = clock
        self._entries: OrderedDict[ChatKey, tuple[float, ChatSettings]] = OrderedDict()
        # Bumped by every local write: a read that started before it must not overwrite it.
        self._writes: dict[ChatKey, int] = {}

    async def get(self, key: ChatKey) -> ChatSettings:
        """This chat's settings, at most `ttl_s` old."""
        found = self._entries.get(key)
        if found is not None and self._clock() - found[0] < self.ttl_s:
            self._entries.move_to_end(key)
            return found[1]
        writes = self._writes.get(key, 0)
        fresh = await self.store.get(key.platform, key.chat_id)
        if self._writes.get(key, 0) == writes:
            self._keep(key, fresh)
        return fresh

    async def warm(self) -> int:
        """Read every chat that has stored settings (up to `max_chats`) into the cache, so
        `peek` knows them from the start; returns how many. Called once at start."""
        after: int | None = None
        count = 0
        while count < self._max:
            wanted = min(WARM_PAGE, self._max - count)
            page = await self.store.listing(wanted, after)
            for settings in page:
                self._keep(settings.chat_key, settings)
            count += len(page)
            if len(page) < wanted:
                break
            after = page[-1].id
        return count

    def peek(self, key: ChatKey) -> ChatSettings | None:
        """What is known without waiting (possibly older than `ttl_s`), or None."""
        found = self._entries.get(key)
        return found[1] if found is not None else None

    def forget(self, key: ChatKey) -> None:
        """Drop this chat's entry, so the next read asks the database."""
        self._entries.pop(key, None)

    async def update(self, key: ChatKey, *, by: str, **changes: Any) -> ChatSettings:
        return self._stored(await self.store.update(key.platform, key.chat_id, by=by, **changes))

    async def reset(self, key: ChatKey, *, by: str) -> ChatSettings:
        return self._stored(await self.store.reset(key.platform, key.chat_id, by=by))

    async def modify(self, key: ChatKey, *, by: str, change: Change) -> ChatSettings:
        return self._stored(
            await self.store.modify(key.platform, key.chat_id, by=by, change=change)
        )

    async def listing(self, limit: int = 100, after_id: int | None = None) -> list[ChatSettings]:
        return await self.store.listing(limit, after_id)

    def _stored(self, settings: ChatSettings) -> ChatSettings:
        key = settings.chat_key
        self._writes[key] = self._writes.get(key, 0) + 1
        if len(self._writes) > self._max:
            self._writes.pop(next(iter(self._writes)))
        self._keep(key, settings)
        return settings

    def _keep(self, key: ChatKey, settings: ChatSettings) -> None:
        self._entries[key] = (self._clock(), settings)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
