"""One turn at a time per chat, many chats at once, every task accounted for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)


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

    def busy(self, chat_key: str) -> bool:
        """A turn of this chat is in flight or waiting here."""
        return chat_key in self._locks

    @property
    def active_chats(self) -> int:
        return len(self._locks)


class TaskTracker:
    """Every background task and turn in flight, so a stop can finish them, then cancel the rest.

    Why one class: channels spawn a task per update (so a slow reply never blocks
    receiving), the processor tracks turns and compactions, and each needs the same three
    things: keep a strong reference (asyncio only keeps weak ones), log a failure instead
    of losing it to "Task exception was never retrieved", and at stop wait a grace period
    before cancelling what is left.
    """

    def __init__(self, label: str = "background") -> None:
        self._label = label
        self._tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def spawn(self, coro: Coroutine[Any, Any, object], *, name: str | None = None) -> None:
        """Run `coro` as a tracked task; an exception it raises is logged, never lost."""
        task = asyncio.create_task(coro, name=name)
        self._add(task)
        task.add_done_callback(self._finished)

    @asynccontextmanager
    async def track(self) -> AsyncIterator[None]:
        """Count the current task (e.g. a turn run by a channel's task) while the body runs."""
        task = asyncio.current_task()
        assert task is not None
        self._add(task)
        try:
            yield
        finally:
            self._discard(task)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> int:
        """Wait for everything tracked; cancel what outlives the timeout. Returns how many."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return 0
        except TimeoutError:
            return await self.cancel()

    async def cancel(self) -> int:
        """Cancel everything tracked now and wait until it has ended. Returns how many."""
        leftovers = [task for task in self._tasks if task is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
        return len(leftovers)

    def _add(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        self._idle.clear()

    def _discard(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self._idle.set()

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("%s task %s failed", self._label, task.get_name(), exc_info=error)
