"""One turn at a time per chat, many chats at once, every task accounted for."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ChatSerializer:
    """Per-chat FIFO locks plus one global bound on turns in flight.

    Why: a chat's turns must see each other in order (the second message's context
    contains the first reply), while unrelated chats must not wait on each other. The
    global bound keeps a burst of 1,000 chats from opening 1,000 model calls at once.
    Locks are created on demand and forgotten when idle, so memory stays bounded by the
    number of chats with work in flight, not by every chat ever seen.
    """

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._global = asyncio.Semaphore(max_in_flight)
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiters: dict[str, int] = {}

    @asynccontextmanager
    async def turn(self, chat_key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(chat_key, asyncio.Lock())
        self._waiters[chat_key] = self._waiters.get(chat_key, 0) + 1
        try:
            async with lock:  # asyncio.Lock wakes waiters in FIFO order
                async with self._global:
                    yield
        finally:
            remaining = self._waiters[chat_key] - 1
            if remaining:
                self._waiters[chat_key] = remaining
            else:
                del self._waiters[chat_key]
                del self._locks[chat_key]

    @property
    def active_chats(self) -> int:
        return len(self._locks)


class TaskTracker:
    """Knows every turn in flight so a stop can finish them, then cancel the rest."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[object]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @asynccontextmanager
    async def track(self) -> AsyncIterator[None]:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._idle.clear()
        try:
            yield
        finally:
            self._tasks.discard(task)
            if not self._tasks:
                self._idle.set()

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> int:
        """Wait for in-flight turns; cancel what outlives the timeout. Returns how many."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return 0
        except TimeoutError:
            leftovers = list(self._tasks)
            for task in leftovers:
                task.cancel()
            await asyncio.gather(*leftovers, return_exceptions=True)
            return len(leftovers)
