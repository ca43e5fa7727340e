"""Tasks in flight, tracked so a stop can finish them and then cancel the rest.

Why at the top of core: the channels (a task per update), the processor (turns and
summaries) and the job runner all need the same tracking; it belongs to none of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)


class TaskTracker:
    """Every background task and turn in flight, so a stop can finish them, then cancel the rest.

    It keeps a strong reference (asyncio only keeps weak ones), logs a failure instead of
    losing it to "Task exception was never retrieved", and at stop waits a grace period
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

    async def idle(self) -> None:
        """Wait until nothing tracked is running (however long that takes)."""
        await self._idle.wait()

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
