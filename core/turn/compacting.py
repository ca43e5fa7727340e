"""Folding what fell out of a turn's context into the chat's summary, in the background.

A summary is written after the reply went out, counted for the turn's sender; the
processor only says what fell out.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.context.compaction import Compactor
from core.messages import InboundMessage
from core.tasks import TaskTracker
from core.usage.meter import UsageSubject
from memory.turns.types import Turn


class BackgroundCompaction:
    """Spawns summary work; `tasks` is the processor's tracker, so a shutdown drains it."""

    def __init__(self, compactor: Compactor | None, tasks: TaskTracker) -> None:
        self._compactor = compactor
        self._tasks = tasks
        self._summaries = TaskTracker("summary")

    def after_turn(
        self, message: InboundMessage, dropped: Sequence[Turn], summary: Turn | None
    ) -> None:
        """Fold the turns that fell out of this context into the chat's summary, later."""
        if self._compactor is None:
            return
        due = self._compactor.due(message.chat_key, dropped)
        if not due:
            return
        self._summaries.spawn(
            self._fold(self._compactor, message, due, summary), name=f"summary {message.chat_key}"
        )

    async def idle(self) -> None:
        """Wait for the summaries being written."""
        await self._summaries.idle()

    async def _fold(
        self,
        compactor: Compactor,
        message: InboundMessage,
        due: Sequence[Turn],
        summary: Turn | None,
    ) -> None:
        async with self._tasks.track():
            who = UsageSubject.of(message)  # compaction is counted for the turn's sender
            await compactor.fold(message.chat_key, message.chat_type.value, due, summary, who)
