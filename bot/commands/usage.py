"""`/usage`: what the model cost, read from the usage counters (memory.usage.store).

Anyone sees their own tokens today and this month (UTC), and their daily allowance when
`[limits] user_tokens_per_day` is set; admins (`[bot] admins`) also get `/usage group`
(this chat) and `/usage top` (who and where spends most this month). The numbers are
the ones the quotas compare, so what a user is told matches why they were refused.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date
from typing import Protocol

from core.admins import Admins
from core.clock import WallClock, utc_now
from core.messages import ChatType, InboundMessage, Reply
from core.usage.quota import QuotaLimits
from memory.usage.types import GroupBy, UsageGroup, UsageScope, UsageTotals

TOP = 5
USAGE_HELP = "Usage: /usage — your tokens; admins: /usage group, /usage top"


class UsageReads(Protocol):
    """The reads `/usage` needs (memory.usage.store.UsageStore)."""

    async def totals(
        self, since: date, until: date, scope: UsageScope | None = None
    ) -> UsageTotals: ...

    async def grouped(
        self, by: GroupBy, since: date, until: date, *, limit: int | None = None
    ) -> list[UsageGroup]:
        """Only the unscoped ranking `/usage top` shows (the store also takes a scope)."""


def tokens_line(label: str, totals: UsageTotals) -> str:
    """`label: 1,234 tokens in 3 model calls` (how many of them we counted ourselves)."""
    calls = "call" if totals.calls == 1 else "calls"
    line = f"{label}: {totals.tokens:,} tokens in {totals.calls:,} model {calls}"
    if totals.estimated_calls:
        line += f" ({totals.estimated_calls:,} counted by me: the endpoint did not say)"
    if totals.cached_tokens:
        line += (
            f"; {totals.cached_tokens:,} prompt tokens were cache hits "
            f"({totals.hit_rate:.0%} of {totals.prompt_tokens:,})"
        )
    return line


def allowance_line(label: str, used: int, limit: int) -> str:
    return f"{label}: {used:,} of {limit:,} tokens used today (resets at 00:00 UTC)"


class UsageCommand:
    """The `/usage` handler: `await command(message, args)` returns the reply."""

    def __init__(
        self,
        usage: UsageReads,
        *,
        admins: Admins,
        limits: QuotaLimits | None = None,
        clock: WallClock = utc_now,
        top: int = TOP,
        pictures_per_day: int | None = None,  # [images] max_per_user_per_day; None: no pictures
    ) -> None:
        self._usage = usage
        self._admins = admins
        self._limits = limits or QuotaLimits()
        self._clock = clock
        self._top = top
        self._pictures_per_day = pictures_per_day

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        sub = args[0].casefold() if args else ""
        if sub in ("", "me"):
            return await self._mine(message)
        if sub not in ("group", "chat", "top"):
            return Reply(USAGE_HELP)
        if not self._admins.here(message):
            return Reply("Only admins can see a group's or everyone's usage; /usage shows yours.")
        if sub == "top":
            return await self._top_spenders(message)
        return await self._this_chat(message)

    def _days(self) -> tuple[date, date]:
        today = self._clock().astimezone(UTC).date()
        return today, today.replace(day=1)

    async def _mine(self, message: InboundMessage) -> Reply:
        today, month = self._days()
        scope = UsageScope(message.platform, user_id=message.sender_id)
        day_totals = await self._usage.totals(today, today, scope)
        lines = [
            tokens_line("Your tokens today", day_totals),
            tokens_line("This month", await self._usage.totals(month, today, scope)),
        ]
        if self._limits.user_tokens_per_day:
            lines.append(
                allowance_line(
                    "Your daily allowance", day_totals.tokens, self._limits.user_tokens_per_day
                )
            )
        if self._pictures_per_day is not None:
            pictures = await self._usage.totals(today, today, replace(scope, purpose="image"))
            limit = self._pictures_per_day
            of = f" of {limit:,} a day" if limit else ""
            lines.append(f"Your pictures today: {pictures.calls:,}{of} (their tokens are above)")
        return Reply("\n".join(lines))

    async def _this_chat(self, message: InboundMessage) -> Reply:
        today, month = self._days()
        group = message.chat_type is ChatType.GROUP
        scope = UsageScope(message.platform, chat_id=message.chat_id)
        day_totals = await self._usage.totals(today, today, scope)
        where = "This group's" if group else "This chat's"
        lines = [
            tokens_line(f"{where} tokens today", day_totals),
            tokens_line("This month", await self._usage.totals(month, today, scope)),
        ]
        if group and self._limits.group_tokens_per_day:
            limit = self._limits.group_tokens_per_day
            lines.append(allowance_line("Group allowance", day_totals.tokens, limit))
        return Reply("\n".join(lines))

    async def _top_spenders(self, message: InboundMessage) -> Reply:
        today, month = self._days()
        users = await self._usage.grouped("user", month, today, limit=self._top)
        chats = await self._usage.grouped("chat", month, today, limit=self._top)
        everyone = await self._usage.totals(month, today)
        lines = [tokens_line("Everyone this month", everyone), "", "Top users this month:"]
        lines += _ranked(users)
        lines += ["", "Top chats this month:"]
        lines += _ranked(chats)
        # Other people's numbers: in a group, sent to the admin privately where possible.
        return Reply("\n".join(lines), private=message.chat_type is ChatType.GROUP)


def _ranked(groups: list[UsageGroup]) -> list[str]:
    if not groups:
        return ["(none yet)"]
    return [f"{n}. {g.key} — {g.totals.tokens:,} tokens" for n, g in enumerate(groups, 1)]


__all__ = ["USAGE_HELP", "UsageCommand", "UsageReads", "allowance_line", "tokens_line"]
