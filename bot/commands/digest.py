"""`/digest`: what the group missed, now or every day (admins).

`/digest` posts a recap of the chat since its last digest (core/digest/recap.py);
`/digest daily HH:MM` makes it a daily post at that time in the chat's time zone (`/bot
timezone`), kept as a reminder of kind "digest" so the scheduler's exactly-once claim
covers it (core/reminders/scheduler.py); `/digest off` stops it. This module only reads
the command and words the answer.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import tzinfo

from core.admins import Admins
from core.digest.recap import Digester
from core.messages import InboundMessage, Reply
from core.reminders.service import Reminders
from core.usage.meter import UsageSubject
from memory.reminders.types import ReminderRefused

DIGEST_KIND = "digest"
DIGEST_TEXT = "daily digest"
ZoneFor = Callable[[str, str], Awaitable[tzinfo]]  # (platform, chat_id) -> the chat's zone
_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
USAGE = (
    "Usage (admins): /digest — a recap of this chat since the last digest (or the last "
    "24 hours); /digest daily HH:MM — every day at that time (this chat's time zone, "
    "/bot timezone); /digest off — stop the daily digest."
)


@dataclass(frozen=True)
class DigestCommand:
    """`/digest` for bot/commands/table.py: (message, args) -> Reply."""

    digester: Digester
    admins: Admins
    zone_for: ZoneFor
    reminders: Reminders | None

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        if not self.admins.here(message):
            return Reply("Only admins can ask for a digest.")
        sub = args[0].casefold() if args else ""
        if sub in ("help", "?"):
            return Reply(USAGE)
        if sub == "daily":
            return Reply(await self._daily(message, args[1:]))
        if sub in ("off", "stop"):
            return Reply(await self._off(message))
        if sub:
            return Reply(USAGE)
        return Reply(await self.now(message))

    async def now(self, message: InboundMessage) -> str:
        zone = await self.zone_for(message.platform, message.chat_id)
        recap = await self.digester.recap(
            message.platform, message.chat_id, zone, UsageSubject.of(message)
        )
        if recap.posted:  # the reply leaves right after: the next digest starts here
            await self.digester.posted(message.platform, message.chat_id, recap)
        return recap.text

    async def _daily(self, message: InboundMessage, args: list[str]) -> str:
        if self.reminders is None:
            return "A daily digest needs reminders ([reminders] enabled = true)."
        found = _CLOCK.match(args[0]) if len(args) == 1 else None
        if found is None:
            return "Usage: /digest daily HH:MM — e.g. /digest daily 21:00"
        at = f"{int(found.group(1)):02d}:{found.group(2)}"
        try:
            done = await self.reminders.set_parts(
                message, f"every day {at}", DIGEST_TEXT, kind=DIGEST_KIND
            )
        except ReminderRefused as refused:
            return f"Not set: {refused}."  # an earlier daily digest stays as it was
        replaced = await self._cancel_daily(message, keep=done.reminder.id)
        zone = await self.reminders.zone_for(message.platform, message.chat_id)
        note = " (the earlier daily digest is replaced)" if replaced else ""
        return (
            f"📋 Daily digest #{done.reminder.id} set for {at} every day ({zone.key}){note}. "
            "/digest off stops it."
        )

    async def _off(self, message: InboundMessage) -> str:
        if self.reminders is None:
            return "There is no daily digest here."
        if not await self._cancel_daily(message):
            return "There is no daily digest here."
        return "The daily digest is off."

    async def _cancel_daily(self, message: InboundMessage, keep: int | None = None) -> int:
        """Cancel this chat's daily digests (but `keep`); returns how many."""
        assert self.reminders is not None
        found = await self.reminders.listing(message.platform, message.chat_id, None)
        cancelled = 0
        for reminder in found:
            if reminder.kind == DIGEST_KIND and reminder.state == "active" and reminder.id != keep:
                await self.reminders.cancel(reminder.id, by=message.sender_key, admin=True)
                cancelled += 1
        return cancelled
