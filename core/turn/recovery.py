"""Recovery: finish what a dead process (or replica) accepted but did not answer or send.

At start and every `interval_s`, open intake rows are looked at oldest first: `pending`
ones are answered, `answered` ones are delivered, each only when its chat is free here
and (on PostgreSQL) its chat lock can be had without waiting, so a live turn is never
taken over. Rows older than `within_s` are too old to answer and become `expired`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from core.clock import WallClock, utc_now
from memory.chats.types import ChatKey
from memory.turns.types import IntakeEntry, IntakeStats

log = logging.getLogger(__name__)


class OpenTurns(Protocol):
    """What recovery reads and expires (memory.turns.intake.IntakeStore)."""

    async def open_entries(self, limit: int = 100) -> list[IntakeEntry]: ...

    async def expire(self, received_before: datetime) -> int: ...

    async def stats(self) -> IntakeStats: ...


class Finisher(Protocol):
    """What recovery asks of the processor; each returns False when it skipped the row."""

    def is_busy(self, chat_key: ChatKey) -> bool: ...

    async def resume_run(self, entries: Sequence[IntakeEntry]) -> int:
        """Answer the leading rows of `entries` (pending, one sender, one chat, in order)
        that make one burst, as one turn; how many it finished (0: skipped)."""

    async def redeliver(self, entry: IntakeEntry) -> bool: ...


@dataclass(frozen=True)
class RecoveryOptions:
    interval_s: float = 10.0
    within_s: float = 900.0  # 0: recovery off
    batch: int = 200


@dataclass
class RecoveryCounters:
    recovered_total: int = 0
    expired_total: int = 0


class Recovery:
    """Sweeps the intake; `run()` is the background loop, `sweep()` one pass."""

    def __init__(
        self,
        turns: OpenTurns,
        finisher: Finisher,
        options: RecoveryOptions | None = None,
        *,
        clock: WallClock | None = None,
    ) -> None:
        self._turns = turns
        self._finisher = finisher
        self._options = options or RecoveryOptions()
        self._clock = clock or utc_now
        self.counters = RecoveryCounters()

    @property
    def enabled(self) -> bool:
        return self._options.within_s > 0

    async def sweep(self) -> int:
        """One pass; returns how many rows it finished."""
        if not self.enabled:
            return 0
        cutoff = self._clock() - timedelta(seconds=self._options.within_s)
        expired = await self._turns.expire(cutoff)
        if expired:
            self.counters.expired_total += expired
            log.warning(
                "recovery: %d accepted message(s) older than %.0fs expired unanswered",
                expired,
                self._options.within_s,
            )
        entries = await self._turns.open_entries(self._options.batch)
        by_chat: dict[ChatKey, list[IntakeEntry]] = {}
        for entry in entries:
            by_chat.setdefault(entry.chat_key, []).append(entry)
        done = await asyncio.gather(*(self._finish_chat(rows) for rows in by_chat.values()))
        finished = sum(done)
        if finished:
            log.info("recovery: finished %d accepted message(s)", finished)
        return finished

    async def _finish_chat(self, entries: Sequence[IntakeEntry]) -> int:
        """A chat's open rows in order; stop at the first one that could not be finished.
        A sender's consecutive pending rows go to the finisher together, so a burst a
        dead process was collecting is answered as one turn, as it would have been."""
        finished = 0
        while finished < len(entries):
            entry = entries[finished]
            if self._finisher.is_busy(entry.chat_key):
                break
            try:
                if entry.state == "pending":
                    done = await self._finisher.resume_run(_pending_run(entries[finished:]))
                else:
                    done = int(await self._finisher.redeliver(entry))
            except Exception:  # one chat's failure must not stop the others' recovery
                log.exception("recovery: message #%d in %s failed", entry.id, entry.chat_key)
                done = 0
            if not done:
                break
            finished += done
            # Counted as each chat's rows are delivered, not when the whole sweep ends:
            # /healthz must never show them delivered but not yet recovered.
            self.counters.recovered_total += done
        return finished

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep now, then every interval, until `stop` is set. Never raises."""
        if not self.enabled:
            log.info("recovery: off ([bot] recover_within_s = 0)")
            return
        interval = self._options.interval_s
        while not stop.is_set():
            try:
                await self.sweep()
            except Exception:
                log.exception("recovery: sweep failed; trying again in %.0fs", interval)
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass

    async def health(self) -> dict[str, float | int | None]:
        """The `turns` part of /healthz."""
        stats = await self._turns.stats()
        oldest = stats.oldest_pending
        age = (self._clock() - oldest).total_seconds() if oldest is not None else None
        return {
            "pending": stats.pending,
            "answered_undelivered": stats.answered,
            "oldest_pending_s": round(age, 1) if age is not None else None,
            "recovered_total": self.counters.recovered_total,
            "expired_total": self.counters.expired_total,
        }


def _pending_run(entries: Sequence[IntakeEntry]) -> list[IntakeEntry]:
    """The first row and the pending rows of the same sender right after it."""
    first = entries[0]
    run = [first]
    for entry in entries[1:]:
        if entry.state != "pending" or entry.sender_id != first.sender_id:
            break
        run.append(entry)
    return run
