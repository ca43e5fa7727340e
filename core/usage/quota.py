"""Daily token quotas, checked before a message is accepted for the model.

Why the usage counters: they live in the database, so every replica sees the same spend
and what is capped is exactly what `/usage` shows. A refused sender is told at most once
an hour per chat (so the quota cannot make the bot spam a group) when the allowance
resets at midnight UTC. A turn that starts under the limit runs to the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from cachetools import LRUCache

from core.clock import WallClock, utc_now
from core.messages import ChatType, InboundMessage
from memory.chats.types import ChatKey
from memory.usage.types import DaySpend, SpendReader

NOTICE_EVERY = timedelta(hours=1)
Scope = Literal["user", "group", "global"]
_WHO = {
    "user": "You have used your daily token allowance",
    "group": "This group has used its daily token allowance",
    "global": "I have used my daily token budget",
}


@dataclass(frozen=True)
class QuotaLimits:
    """Tokens (prompt + completion) per UTC day; 0 means unlimited."""

    user_tokens_per_day: int = 0
    group_tokens_per_day: int = 0
    global_tokens_per_day: int = 0

    @property
    def enabled(self) -> bool:
        limits = (self.user_tokens_per_day, self.group_tokens_per_day, self.global_tokens_per_day)
        return any(limits)


@dataclass(frozen=True)
class QuotaDecision:
    allowed: bool
    over: Scope | None = None  # which allowance is used up
    notice: str | None = None  # the line to send; None: stay silent (told within the hour)


ALLOWED = QuotaDecision(True)


def quota_notice(over: Scope, now: datetime) -> str:
    """One short line: whose allowance is used up and when it resets."""
    left = next_reset(now) - now
    hours, rest = divmod(int(left.total_seconds()) // 60, 60)
    wait = f"{hours} h {rest} min" if hours else f"{max(rest, 1)} min"
    return f"{_WHO[over]}; it resets at 00:00 UTC (in {wait})."


def next_reset(now: datetime) -> datetime:
    """The next midnight UTC after `now`."""
    today = now.astimezone(UTC).date()
    return datetime.combine(today + timedelta(days=1), datetime.min.time(), UTC)


class QuotaGuard:
    """Decides whether a message may go to the model; paces the notices it asks for.

    Who is exempt (admins, the operator's console) is the caller's decision.
    """

    def __init__(
        self,
        limits: QuotaLimits,
        spend: SpendReader,
        *,
        clock: WallClock = utc_now,
        max_keys: int = 10_000,
    ) -> None:
        self.limits = limits
        self._spend = spend
        self._clock = clock
        # (sender, chat) -> when its last notice may be repeated; bounded, stalest go first
        self._told_until: LRUCache[tuple[str, ChatKey], datetime] = LRUCache(maxsize=max_keys)

    async def over(self, message: InboundMessage) -> Scope | None:
        """Which allowance this message's sender has used up today (None: none). Asks
        nothing of the notice pacing, so it may be used before anything is decided (a
        group voice note is not transcribed for its wake word past the allowance)."""
        return await self._over_at(message, self._clock().astimezone(UTC))

    async def check(self, message: InboundMessage) -> QuotaDecision:
        now = self._clock().astimezone(UTC)
        over = await self._over_at(message, now)
        if over is None:
            return ALLOWED
        key = (message.sender_key, message.chat_key)
        told_until = self._told_until.get(key)
        if told_until is not None and now < told_until:
            return QuotaDecision(False, over)
        # Told again after an hour, or at once on a new day (the old day's pause is over).
        self._told_until[key] = min(now + NOTICE_EVERY, next_reset(now))
        return QuotaDecision(False, over, quota_notice(over, now))

    async def _over_at(self, message: InboundMessage, now: datetime) -> Scope | None:
        """One clock reading serves the day spent and the notice's pacing."""
        limits = self.limits
        if not limits.enabled:
            return None
        spent = await self._spend.spent_on(
            now.date(),
            message.platform,
            message.chat_id,
            message.sender_id,
            everyone=limits.global_tokens_per_day > 0,
        )
        return _over(limits, spent, group=message.chat_type is ChatType.GROUP)


def _over(limits: QuotaLimits, spent: DaySpend, *, group: bool) -> Scope | None:
    if limits.global_tokens_per_day and spent.everyone >= limits.global_tokens_per_day:
        return "global"
    if group and limits.group_tokens_per_day and spent.chat >= limits.group_tokens_per_day:
        return "group"
    if limits.user_tokens_per_day and spent.user >= limits.user_tokens_per_day:
        return "user"
    return None
