"""The scheduler's promises on the real database with an injected clock: each occurrence
claimed and sent once (also by two schedulers at once), a crash between claim and mark
finished late by the next process, late and missed after an outage, a repeat catching
up only once, a refused send tried again. Runs on SQLite, and on PostgreSQL when
CHATTERD_TEST_DATABASE_URL is set.

Sends go through the core's real door (Outbox.send_proactive over ChannelRoutes) into a
recording channel, the one thing a test owns here.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from core.messages import ChatType, DeliveryError, ImageRef, InboundMessage, OutboundMessage, Sent
from core.reminders.scheduler import Scheduler, SchedulerOptions
from core.reminders.service import ReminderLimits, Reminders, list_line
from core.turn.delivery import ChannelRoutes, Outbox
from memory.reminders.types import Reminder
from memory.turns.store import SqlStorage
from tests.fakes.manual_clock import ManualWallClock

START = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)


class RecordingChannel:
    """A started channel as the core sees it: takes every send, or refuses while `down`."""

    name = "telegram"
    pushes = True  # it takes messages nobody is waiting for (reminders)

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []
        self.down = False

    async def send(self, message: OutboundMessage) -> Sent:
        if self.down:
            raise DeliveryError("telegram: the platform is unreachable")
        self.sent.append(message)
        return Sent((str(len(self.sent)),))

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        return None


async def allow(reminder: Reminder) -> str | None:
    return None


async def no_task(message: InboundMessage) -> str | None:
    raise AssertionError("no task here")


def scheduler(
    storage: SqlStorage, channel: RecordingChannel, clock: ManualWallClock, name: str
) -> Scheduler:
    routes = ChannelRoutes()
    routes.add(channel)
    return Scheduler(
        storage.reminders,
        send=Outbox(routes, storage.intake).send_proactive,
        run_task=no_task,
        task_outcome=no_task,
        gate=allow,
        options=SchedulerOptions(catch_up_s=6 * 3600),
        clock=clock,
        worker_id=name,
    )


def alice(group: bool = True) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id="-100500" if group else "1001",
        chat_type=ChatType.GROUP if group else ChatType.PRIVATE,
        sender_id="1001",
        sender_name="Alice",
        text="",
        message_id="77",
    )


def service(storage: SqlStorage, clock: ManualWallClock) -> Reminders:
    return Reminders(
        storage.reminders,
        default_zone="Europe/Berlin",
        limits=ReminderLimits(min_interval_s=5),
        clock=clock,
    )


async def test_two_schedulers_at_the_same_moment_send_each_occurrence_once(
    storage: SqlStorage,
) -> None:
    clock, channel = ManualWallClock(START), RecordingChannel()
    reminders = service(storage, clock)
    await reminders.set_from_text(alice(), "every 5m stretch")
    first, second = scheduler(storage, channel, clock, "a"), scheduler(storage, channel, clock, "b")
    for _ in range(6):
        clock.advance(minutes=5)
        await asyncio.gather(first.tick(), second.tick(), first.tick(), second.tick())
    assert [m.text for m in channel.sent] == ["⏰ stretch"] * 6
    sent = channel.sent[0]
    assert (sent.mention_user_id, sent.reply_to_message_id, sent.reminder_id) == ("1001", "77", 1)
    runs = await storage.reminders.runs_of(1)
    assert [r.due_at for r in runs] == [START + timedelta(minutes=5 * n) for n in range(1, 7)]
    assert {r.state for r in runs} == {"delivered"}


async def test_a_claim_whose_process_died_is_sent_late_once_by_the_next(
    storage: SqlStorage,
) -> None:
    clock, channel = ManualWallClock(START), RecordingChannel()
    reminders = service(storage, clock)
    done = await reminders.set_from_text(alice(group=False), "in 10m call the bank")
    clock.advance(minutes=10)
    # the dead process got as far as the claim (its send never happened, or never marked)
    run = await storage.reminders.claim(
        done.reminder, due=START + timedelta(minutes=10), next_due=None, run_state="claimed",
        skipped=0, by="dead", now=clock(),
    )  # fmt: skip
    assert run is not None
    clock.advance(minutes=3)
    restarted = scheduler(storage, channel, clock, "new")
    assert await restarted.tick() == 1
    assert await restarted.tick() == 0
    (sent,) = channel.sent
    assert sent.text == ("⏰ call the bank\n(late: it was due at 11:10 (Europe/Berlin, UTC+01:00))")
    (finished,) = await storage.reminders.runs_of(done.reminder.id)
    assert finished.state == "late"


async def test_down_at_the_due_time_late_within_catch_up_else_missed_and_listed(
    storage: SqlStorage,
) -> None:
    clock, channel = ManualWallClock(START), RecordingChannel()
    reminders = service(storage, clock)
    soon = await reminders.set_from_text(alice(), "in 1m soon")
    later = await reminders.set_from_text(alice(), "in 2h later")
    clock.advance(hours=9)  # 7-9 hours after they were due: one within catch-up...
    clock.now = START + timedelta(hours=6, minutes=30)
    await scheduler(storage, channel, clock, "after-restart").tick()
    (sent,) = channel.sent  # "later" was due 4.5 h ago: late; "soon" 6.5 h ago: missed
    assert sent.text.startswith("⏰ later\n(late: it was due at 13:00")
    missed = await storage.reminders.get(soon.reminder.id)
    assert missed is not None and missed.state == "missed"
    line = list_line(missed, clock(), show_owner=False)
    assert line == "#1 MISSED, was due 11:01 (Europe/Berlin, UTC+01:00): soon"
    listed = await reminders.listing("telegram", "-100500", "1001")
    assert [r.id for r in listed] == [soon.reminder.id]  # the delivered one is done
    assert later.reminder.id not in [r.id for r in listed]


async def test_a_repeat_that_was_down_sends_only_its_latest_occurrence(
    storage: SqlStorage,
) -> None:
    clock, channel = ManualWallClock(START), RecordingChannel()
    reminders = service(storage, clock)
    done = await reminders.set_from_text(alice(), "every 5m stretch")
    clock.advance(minutes=62)
    restarted = scheduler(storage, channel, clock, "back")
    await restarted.tick()
    await restarted.tick()
    (sent,) = channel.sent
    assert sent.text.startswith("⏰ stretch\n(late: it was due at 12:00")
    (run,) = await storage.reminders.runs_of(done.reminder.id)
    assert (run.state, run.skipped) == ("late", 11)
    fresh = await storage.reminders.get(done.reminder.id)
    assert fresh is not None and fresh.next_due_at == START + timedelta(minutes=65)
    clock.advance(minutes=3)
    await restarted.tick()
    assert [m.text for m in channel.sent][1:] == ["⏰ stretch"]  # back on time


async def test_a_refused_send_stays_claimed_and_is_sent_once_later(storage: SqlStorage) -> None:
    clock, channel = ManualWallClock(START), RecordingChannel()
    reminders = service(storage, clock)
    await reminders.set_from_text(alice(group=False), "in 1m tea")
    live = scheduler(storage, channel, clock, "live")
    channel.down = True
    clock.advance(minutes=1)
    assert await live.tick() == 0
    (open_run,) = await storage.reminders.open_runs()
    assert open_run.state == "claimed"
    channel.down = False
    assert await live.tick() == 0  # waits before trying again
    clock.advance(seconds=20)
    assert await live.tick() == 1
    assert await live.tick() == 0
    assert [m.text.splitlines()[0] for m in channel.sent] == ["⏰ tea"]


async def test_a_cancelled_reminder_is_never_sent(storage: SqlStorage) -> None:
    clock, channel = ManualWallClock(START), RecordingChannel()
    reminders = service(storage, clock)
    done = await reminders.set_from_text(alice(), "in 1m tea")
    refused = await reminders.cancel(done.reminder.id, by="telegram:1002", admin=False)
    assert refused == "Only the person who set #1 (or an admin) can cancel it."
    assert await reminders.cancel(1, by="telegram:1001", admin=False) == "Cancelled #1: tea"
    clock.advance(minutes=2)
    await scheduler(storage, channel, clock, "x").tick()
    assert channel.sent == []
