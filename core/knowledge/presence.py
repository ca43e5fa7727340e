"""Does this chat have any documents? Asked on every addressed turn, answered from memory.

Why: that query is most of what the knowledge base adds to a turn in a chat without
documents. The answer is kept per scope until this process writes to the knowledge
tables or `ttl_s` passes, which bounds how late another process's document is seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

PRESENCE_TTL_S = 5.0


class CountedStore(Protocol):
    writes: int  # bumped by every write through the store

    async def fingerprint(self, scopes: Sequence[str]) -> dict[str, tuple[int, int, str]]: ...


class DocumentPresence:
    """`await presence.any(scopes)`: True when one of `scopes` has a ready document."""

    def __init__(
        self,
        store: CountedStore,
        *,
        ttl_s: float = PRESENCE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._clock = clock
        self._known: dict[tuple[str, ...], tuple[bool, int, float]] = {}

    async def any(self, scopes: Sequence[str]) -> bool:
        key = tuple(scopes)
        known = self._known.get(key)
        now = self._clock()
        if known is not None:
            answer, writes, at = known
            if writes == self._store.writes and now - at < self._ttl_s:
                return answer
        writes = self._store.writes  # read before the query: a write during it invalidates
        counts = await self._store.fingerprint(scopes)
        answer = any(entry[0] for entry in counts.values())
        if len(self._known) > 4096:  # one entry per chat; a bound, not an eviction policy
            self._known.clear()
        self._known[key] = (answer, writes, now)
        return answer
