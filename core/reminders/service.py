"""Setting, listing and cancelling reminders: the rules the commands, the model's tool,
the console and the CLI share, so none of them has rules of its own.

A reminder is set in the chat where it was asked for, for the person who asked (never
someone named in the text), in the chat's time zone (`/bot timezone`, else `[bot]
timezone`). Bad input is refused with one line and nothing is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from core.messages import ChatType, InboundMessage
from core.reminders.when import Schedule, WhenError, describe, resolve, zone_label
from memory.reminders.types import Reminder, ReminderDraft, ReminderOverLimit, ReminderRefused

if TYPE_CHECKING:
    from memory.reminders.store import ReminderStore

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
ZoneOf = Callable[[str, str], Awaitable[str | None]]  # (platform, chat_id) -> the chat's zone
CanReach = Callable[[str], bool]  # platform -> a reminder can be delivered there
LISTED = 50
# What a person is told when the store refused a reminder over a limit, by which limit.
OVER_LIMIT = {
    "text": "the text is too long: at most {limit} characters",
    "person": "you have {limit} active reminders, the most one person may have "
    "([reminders] max_per_user); cancel one first",
    "chat": "this chat has {limit} active reminders, the most a chat may have "
    "([reminders] max_per_chat); cancel one first",
}


@dataclass(frozen=True)
class ReminderLimits:
    """`[reminders]`: how many, how often, and how late a missed one is still sent."""

    max_per_user: int = 20
    max_per_chat: int = 100
    min_interval_s: int = 60
    catch_up_s: float = 6 * 3600.0


@dataclass(frozen=True)
class Confirmation:
    reminder: Reminder
    text: str


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Reminders:
    """Set, list and cancel; one instance per daemon, shared by every caller."""

    def __init__(
        self,
        store: ReminderStore,
        *,
        default_zone: str,
        limits: ReminderLimits | None = None,
        zone_of: ZoneOf | None = None,
        can_reach: CanReach | None = None,
        clock: Clock = _utcnow,
    ) -> None:
        self.store = store
        self.limits = limits or ReminderLimits()
        self._default_zone = default_zone
        self._zone_of = zone_of
        self._can_reach = can_reach
        self._clock = clock

    def now(self) -> datetime:
        return self._clock().astimezone(UTC)

    async def zone_for(self, platform: str, chat_id: str) -> ZoneInfo:
        named = await self._zone_of(platform, chat_id) if self._zone_of is not None else None
        return ZoneInfo(named or self._default_zone)

    async def set_from_text(
        self, message: InboundMessage, when_and_text: str, *, kind: str = "remind"
    ) -> Confirmation:
        """`<when> <text>` as typed after `/remind` (or `/schedule`). ReminderRefused."""
        zone = await self.zone_for(message.platform, message.chat_id)
        now = self.now()
        try:
            resolved = resolve(when_and_text, now, zone)
        except WhenError as exc:
            raise ReminderRefused(str(exc)) from None
        return await self._store(
            message, resolved.schedule, resolved.first_due, resolved.rest, kind, zone, now
        )

    async def set_parts(
        self, message: InboundMessage, when: str, text: str, *, kind: str = "remind"
    ) -> Confirmation:
        """A `<when>` (or an ISO time) and the text apart: the model's tool."""
        zone = await self.zone_for(message.platform, message.chat_id)
        now = self.now()
        try:
            resolved = resolve(when, now, zone, whole=True)
        except WhenError as exc:
            raise ReminderRefused(str(exc)) from None
        return await self._store(
            message, resolved.schedule, resolved.first_due, text, kind, zone, now
        )

    async def _store(
        self,
        message: InboundMessage,
        schedule: Schedule,
        first_due: datetime,
        text: str,
        kind: str,
        zone: ZoneInfo,
        now: datetime,
    ) -> Confirmation:
        if self._can_reach is not None and not self._can_reach(message.platform):
            raise ReminderRefused(
                f"I can't send anything unasked in {message.platform} chats"
                + (" (set [http] push_url to allow it)" if message.platform == "http" else "")
                + ", so reminders cannot be set here"
            )
        if not text.strip():
            raise ReminderRefused("the reminder needs a text after the time")
        if schedule.repeats and schedule.min_gap_s() < self.limits.min_interval_s:
            raise ReminderRefused(
                f"a repeat must be at least {self.limits.min_interval_s}s apart "
                "([reminders] min_interval_s)"
            )
        group = message.chat_type is ChatType.GROUP
        try:
            reminder = await self.store.add(
                ReminderDraft(
                    kind=kind,
                    platform=message.platform,
                    chat_id=message.chat_id,
                    chat_type=message.chat_type.value,
                    owner_id=message.sender_id,
                    owner_name=message.sender_name,
                    text=text,
                    rule=schedule.rule,
                    zone=zone.key,
                    first_due=first_due,
                    thread_id=message.thread_id,
                    origin_message_id=message.message_id if group else None,
                ),
                max_per_user=self.limits.max_per_user,
                max_per_chat=self.limits.max_per_chat,
            )
        except ReminderOverLimit as over:
            raise ReminderRefused(OVER_LIMIT[over.what].format(limit=over.limit)) from None
        log.info(
            "%s #%d set in %s by %s for %s (%s)",
            "reminder" if kind == "remind" else "scheduled task",
            reminder.id,
            reminder.chat_key,
            reminder.owner_key,
            first_due.isoformat(),
            schedule.rule,
        )
        return Confirmation(reminder, confirmation(reminder, now))

    async def cancel(self, reminder_id: int, *, by: str, admin: bool) -> str:
        """One line: done, not found, or refused (not yours)."""
        found = await self.store.get(reminder_id)
        if found is None or found.state not in ("active", "missed"):
            return f"There is no active reminder #{reminder_id}."
        if found.owner_key != by and not admin:
            return f"Only the person who set #{reminder_id} (or an admin) can cancel it."
        if not await self.store.cancel(reminder_id, by=by):
            return f"#{reminder_id} had just finished; nothing to cancel."
        return f"Cancelled #{reminder_id}: {found.text}"

    async def listing(self, platform: str, chat_id: str, owner_id: str | None) -> list[Reminder]:
        return await self.store.listing(
            platform=platform, chat_id=chat_id, owner_id=owner_id, limit=LISTED
        )


def confirmation(reminder: Reminder, now: datetime) -> str:
    """`⏰ #12 set for 09:00 tomorrow (Asia/Shanghai, UTC+08:00): call the bank`."""
    assert reminder.next_due_at is not None
    zone = ZoneInfo(reminder.zone)
    icon, verb = ("⏰", "set") if reminder.kind == "remind" else ("🗓", "scheduled")
    when = describe(reminder.next_due_at, now, zone)
    if reminder.rule != "once":
        return f"{icon} #{reminder.id} {verb} {reminder.rule}, first at {when}: {reminder.text}"
    return f"{icon} #{reminder.id} {verb} for {when}: {reminder.text}"


def list_line(reminder: Reminder, now: datetime, *, show_owner: bool) -> str:
    """One reminder in `/remind list`."""
    zone = ZoneInfo(reminder.zone)
    owner = f" (by {reminder.owner_name})" if show_owner else ""
    kind = "" if reminder.kind == "remind" else f" {reminder.kind}"
    if reminder.state == "missed" and reminder.last_due_at is not None:
        when = describe(reminder.last_due_at, now, zone)
        return f"#{reminder.id}{kind} MISSED, was due {when}{owner}: {reminder.text}"
    assert reminder.next_due_at is not None
    when = describe(reminder.next_due_at, now, zone)
    repeat = "" if reminder.rule == "once" else f" [{reminder.rule}]"
    note = ""
    if reminder.last_outcome == "missed" and reminder.last_due_at is not None:
        note = f" (missed {describe(reminder.last_due_at, now, zone)})"
    return f"#{reminder.id}{kind} next {when}{repeat}{owner}: {reminder.text}{note}"


def late_note(due: datetime, now: datetime, zone_name: str) -> str:
    """`late: it was due at 09:00 (Europe/Berlin, UTC+01:00)`."""
    zone = ZoneInfo(zone_name)
    local = due.astimezone(zone)
    at = local.strftime("%H:%M")
    if local.date() != now.astimezone(zone).date():
        at += f" on {local.date().isoformat()}"
    return f"late: it was due at {at} ({zone_label(zone, due)})"


__all__ = [
    "Confirmation",
    "ReminderLimits",
    "ReminderRefused",
    "Reminders",
    "confirmation",
    "late_note",
    "list_line",
]
