"""The scheduler: claims each due occurrence once, sends it, marks it; finishes what a
dead process claimed.

Exactly once as claim -> send -> mark: the claim is one transaction that moves the
reminder on and inserts the occurrence's run row (memory/reminders/store.py), so only one
process takes an occurrence; the send goes through the core's one door
(`Outbox.send_proactive`); the mark is one conditional UPDATE. A crash before the send
leaves a `claimed` run that recovery sends (late). The one-write window: a crash after
the platform took the send and before the mark commits repeats it, so every send carries
`occurrence_id` for the receiver to drop the repeat.

While an occurrence is being sent its sender holds a lock on it (a lease row on
PostgreSQL, freed at once when its replica is gone; in-process on SQLite, where one
process owns the database), so recovery on another replica only takes runs whose sender
is gone.

An occurrence sent late (the daemon was down) says when it was due; one older than
`catch_up_s` is recorded `missed` instead. A repeating reminder catches up at most its
latest occurrence.

A kind given a composer (`compose`: a daily digest) writes its text when due and is sent
plainly to the chat; after the send its composer's `after_send` runs (the digest's mark
moves on), then the run is marked.

Scheduled tasks are a model turn: a message from the owner with the id
`schedule:<id>:<due>` goes through the processor, so the intake's exactly-once, recovery
and delivery apply.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from core.messages import (
    SCHEDULED_PREFIX,
    ChatType,
    DeliveryError,
    InboundMessage,
    OutboundMessage,
    Sent,
    message_in,
    message_to,
)
from core.reminders.service import late_note
from core.reminders.when import Schedule
from memory.reminders.types import Reminder, Run

if TYPE_CHECKING:
    from memory.reminders.store import ReminderStore

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
Send = Callable[[OutboundMessage], Awaitable[Sent]]
RunTask = Callable[[InboundMessage], Awaitable[str | None]]
TaskOutcome = Callable[[InboundMessage], Awaitable[str | None]]  # the intake row's state
Gate = Callable[[Reminder], Awaitable[str | None]]  # a reason not to deliver now, or None
Lock = Callable[[int], AbstractAsyncContextManager[bool]]  # try-lock a key, no waiting


@dataclass(frozen=True)
class Composed:
    """The text of an occurrence whose kind writes it when due (a daily digest), and what
    to do once it is sent (move the digest's mark on)."""

    text: str
    after_send: Callable[[], Awaitable[None]] | None = None


# A kind whose text is written when due: None means nothing to send this time.
Compose = Callable[[Reminder], Awaitable[Composed | None]]
RETRY_AFTER_S = 15.0  # a send the platform refused is tried again after this


@dataclass(frozen=True)
class SchedulerOptions:
    catch_up_s: float = 6 * 3600.0
    tick_s: float = 1.0
    late_after_s: float = 60.0  # even while up: a send this much after its time says late
    # Without database locks (SQLite: one process owns it), a claim made before this
    # process started is a dead one's; another's made since is taken over only once it
    # is this old (no send takes this long).
    stale_claim_s: float = 120.0
    batch: int = 100


def lock_key(reminder_id: int, due: datetime) -> int:
    """A stable signed 64-bit key for one occurrence (the same on every replica)."""
    text = f"reminder\x00{reminder_id}\x00{due.astimezone(UTC).isoformat()}"
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _due_stamp(reminder_id: int, due: datetime) -> str:
    return f"{reminder_id}:{due.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}"


def task_message_id(reminder_id: int, due: datetime) -> str:
    return SCHEDULED_PREFIX + _due_stamp(reminder_id, due)


def occurrence_id(reminder_id: int, due: datetime) -> str:
    """`reminder:12:20261201T083000Z`: one occurrence, the same in every process that
    sends it, so a receiver can drop a repeat (the window in the module docstring)."""
    return "reminder:" + _due_stamp(reminder_id, due)


def owner_message(reminder: Reminder) -> InboundMessage:
    """The reminder as its owner's message in its chat, addressed to the bot: what the
    access rules judge before a delivery, and a scheduled task's turn (with its run's id
    and time added by the scheduler)."""
    return message_in(
        reminder, reminder.owner_id, reminder.owner_name, reminder.text, mentions_bot=True
    )


class Scheduler:
    """`run(stop)` is the background loop; `tick()` one pass (tests call it directly)."""

    def __init__(
        self,
        store: ReminderStore,
        *,
        send: Send,
        run_task: RunTask,
        task_outcome: TaskOutcome,
        gate: Gate,
        options: SchedulerOptions | None = None,
        clock: Clock | None = None,
        lock: Lock | None = None,
        worker_id: str = "",
        compose: dict[str, Compose] | None = None,
    ) -> None:
        self._store = store
        self._send = send
        self._run_task = run_task
        self._task_outcome = task_outcome
        self._gate = gate
        self._options = options or SchedulerOptions()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._db_lock = lock
        self._worker = worker_id or f"w{id(self):x}"
        self._started = self._now()
        self._held: set[int] = set()
        self._turns: set[asyncio.Task[int]] = set()  # scheduled tasks' model turns
        self._retry_at: dict[int, datetime] = {}
        self._compose = dict(compose or {})
        self.sent_total = 0
        self.missed_total = 0

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)

    def compose_with(self, kind: str, compose: Compose) -> None:
        """Occurrences of `kind` get their text from `compose` when due (a daily digest)."""
        self._compose[kind] = compose

    @asynccontextmanager
    async def _lock(self, key: int) -> AsyncIterator[bool]:
        if key in self._held:
            yield False
            return
        self._held.add(key)
        try:
            if self._db_lock is None:
                yield True
                return
            async with self._db_lock(key) as held:
                yield held
        finally:
            self._held.discard(key)

    async def tick(self) -> int:
        """Fire what is due and finish what a dead sender left; returns runs settled."""
        now = self._now()
        done = 0
        while True:  # batch after batch while whole batches fall due and get settled
            due = await self._store.due(now, self._options.batch)
            progress = 0
            for reminder in due:
                if reminder.kind == "task" or reminder.kind in self._compose:
                    # a model turn may take a minute: not in the way of the others
                    self._spawn(self._fire(reminder, now), reminder.id)
                    continue
                try:
                    progress += await self._fire(reminder, now)
                except Exception:  # one reminder's failure must not stop the others
                    log.exception("reminders: #%d failed", reminder.id)
            done += progress
            if len(due) < self._options.batch or not progress:
                break
        for run in await self._store.open_runs(self._options.batch):
            if lock_key(run.reminder_id, run.due_at) in self._held:
                continue
            retry = self._retry_at.get(run.id)
            if retry is not None and retry > now:
                continue
            try:
                done += await self._recover(run, now)
            except Exception:
                log.exception("reminders: recovering run %d of #%d failed", run.id, run.reminder_id)
        return done

    def _spawn(self, job: Coroutine[Any, Any, int], reminder_id: int) -> None:
        async def guarded() -> int:
            try:
                return await job
            except Exception:
                log.exception("reminders: scheduled task #%d failed", reminder_id)
                return 0

        task = asyncio.create_task(guarded(), name=f"scheduled task #{reminder_id}")
        self._turns.add(task)
        task.add_done_callback(self._turns.discard)

    async def idle(self) -> None:
        """Wait for the scheduled tasks' turns started so far (tests; the stop)."""
        while self._turns:
            await asyncio.gather(*list(self._turns))

    async def _fire(self, reminder: Reminder, now: datetime) -> int:
        assert reminder.next_due_at is not None
        schedule = Schedule.from_rule(reminder.rule)
        zone = ZoneInfo(reminder.zone)
        due, skipped = reminder.next_due_at, 0
        if schedule.repeats:
            due, skipped = schedule.latest_due(due, now, zone)
        following = schedule.next_after(due, zone)
        too_old = (now - due).total_seconds() > self._options.catch_up_s
        state = "missed" if too_old else "claimed"
        async with self._lock(lock_key(reminder.id, due)) as held:
            if not held:
                return 0
            run = await self._store.claim(
                reminder,
                due=due,
                next_due=following,
                run_state=state,
                skipped=skipped,
                by=self._worker,
                now=now,
            )
            if run is None:
                return 0  # another replica (or an earlier pass) took it
            if skipped:
                log.warning(
                    "reminders: #%d in %s skipped %d occurrence(s) while down; catching up one",
                    reminder.id,
                    reminder.chat_key,
                    skipped,
                )
            if too_old:
                self.missed_total += 1
                log.warning(
                    "reminders: #%d in %s was due %s, more than [reminders] catch_up_s = %.0fs "
                    "ago: recorded as missed",
                    reminder.id,
                    reminder.chat_key,
                    due.isoformat(),
                    self._options.catch_up_s,
                )
                return 1
            late = due < self._started or (now - due).total_seconds() > self._options.late_after_s
            return await self._deliver(reminder, run, late=late)

    async def _recover(self, run: Run, now: datetime) -> int:
        """A claimed run nobody here is sending: its sender died (or the send failed)."""
        foreign = run.claimed_by != self._worker
        young = (now - run.claimed_at).total_seconds() < self._options.stale_claim_s
        since_start = run.claimed_at > self._started  # else: a process before this one
        if foreign and young and since_start and self._db_lock is None:
            return 0  # no lock tells whether its sender lives: wait until it is stale
        async with self._lock(lock_key(run.reminder_id, run.due_at)) as held:
            if not held:
                return 0  # its sender is alive on another replica
            fresh = [r for r in await self._store.open_runs(self._options.batch) if r.id == run.id]
            reminder = await self._store.get(run.reminder_id)
            if not fresh or reminder is None:
                return 0
            if reminder.state == "cancelled":
                await self._store.finish(run, "skipped", "cancelled before it was sent")
                return 1
            if (now - run.due_at).total_seconds() > self._options.catch_up_s:
                await self._store.finish(run, "missed", "not sent within catch_up_s")
                self.missed_total += 1
                log.warning("reminders: #%d could not be sent in time: missed", run.reminder_id)
                return 1
            late = run.claimed_by != self._worker or run.due_at < self._started
            return await self._deliver(reminder, run, late=late or run.id in self._retry_at)

    async def _deliver(self, reminder: Reminder, run: Run, *, late: bool) -> int:
        why_not = await self._gate(reminder)
        if why_not is not None:
            await self._store.finish(run, "skipped", why_not)
            log.info("reminders: #%d in %s not sent: %s", reminder.id, reminder.chat_key, why_not)
            return 1
        if reminder.kind == "task":
            return await self._run(reminder, run, late=late)
        if reminder.kind in self._compose:
            return await self._composed(reminder, run, self._compose[reminder.kind])
        outbound = self._outbound(reminder, run, self._text(reminder, run, late))
        try:
            await self._send(outbound)
        except DeliveryError as exc:
            self._retry_at[run.id] = self._now() + timedelta(seconds=RETRY_AFTER_S)
            log.warning(
                "reminders: #%d to %s not delivered yet (%s); trying again",
                reminder.id,
                reminder.chat_key,
                exc,
            )
            return 0
        # <- the one-write window: sent, not yet marked (see the module docstring)
        await self._store.finish(run, "late" if late else "delivered")
        self._retry_at.pop(run.id, None)
        self.sent_total += 1
        log.info(
            "reminders: #%d delivered in %s%s",
            reminder.id,
            reminder.chat_key,
            " (late)" if late else "",
        )
        return 1

    async def _composed(self, reminder: Reminder, run: Run, compose: Compose) -> int:
        """An occurrence whose text is written now; sent plainly to the chat (it is for
        everyone there, not a reply to its owner)."""
        composed = await compose(reminder)
        if composed is None:
            await self._store.finish(run, "skipped", "nothing to send this time")
            return 1
        outbound = message_to(
            reminder,
            composed.text,
            reminder_id=reminder.id,
            occurrence_id=occurrence_id(reminder.id, run.due_at),
        )
        try:
            await self._send(outbound)
        except DeliveryError as exc:
            self._retry_at[run.id] = self._now() + timedelta(seconds=RETRY_AFTER_S)
            log.warning(
                "reminders: #%d (%s) not delivered yet (%s)", reminder.id, reminder.kind, exc
            )
            return 0
        # <- the one-write window: sent, not yet marked (see the module docstring)
        if composed.after_send is not None:
            await composed.after_send()
        await self._store.finish(run, "delivered")
        self._retry_at.pop(run.id, None)
        self.sent_total += 1
        log.info(
            "reminders: #%d (%s) delivered in %s", reminder.id, reminder.kind, reminder.chat_key
        )
        return 1

    async def _run(self, reminder: Reminder, run: Run, *, late: bool) -> int:
        message = replace(
            owner_message(reminder),
            message_id=task_message_id(reminder.id, run.due_at),
            timestamp=self._now(),
        )
        reply = await self._run_task(message)
        if reply is not None:  # a channel that does not take the core's sends (HTTP)
            try:
                await self._send(self._outbound(reminder, run, reply))
            except DeliveryError as exc:
                log.warning("scheduled task #%d: answer not delivered: %s", reminder.id, exc)
        outcome = await self._task_outcome(message)
        if outcome == "failed":
            log.warning(
                "scheduled task #%d in %s failed: the model did not answer; the chat was told",
                reminder.id,
                reminder.chat_key,
            )
            await self._store.finish(run, "failed", "the model did not answer")
            return 1
        await self._store.finish(run, "late" if late else "delivered")
        self.sent_total += 1
        return 1

    def _text(self, reminder: Reminder, run: Run, late: bool) -> str:
        text = f"⏰ {reminder.text}"
        if late:
            text += f"\n({late_note(run.due_at, self._now(), reminder.zone)})"
        return text

    @staticmethod
    def _outbound(reminder: Reminder, run: Run, text: str) -> OutboundMessage:
        group = reminder.chat_type == ChatType.GROUP.value
        return message_to(
            reminder,
            text,
            quoting=reminder.origin_message_id if group else None,
            mention_user_id=reminder.owner_id if group else None,
            reminder_id=reminder.id,
            occurrence_id=occurrence_id(reminder.id, run.due_at),
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until `stop` is set; sleeps at most `tick_s`. Never raises."""
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("reminders: pass failed; trying again")
            try:
                await asyncio.wait_for(stop.wait(), self._options.tick_s)
            except TimeoutError:
                pass
        await self.idle()  # the turns end with the processor's drain
