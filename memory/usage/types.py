"""Token usage as the core sees it: deltas, totals, scopes, and the Protocols of the
meter and the quotas (no SQLAlchemy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, Protocol

# A usage counter row's key (memory/usage/store.py sums per key and day).
USAGE_KEY = ("day", "platform", "chat_id", "user_id", "model", "purpose")


@dataclass(frozen=True)
class UsageDelta:
    """What some model calls cost, to be added to the day's row of its key."""

    day: date  # UTC
    platform: str
    chat_id: str
    user_id: str
    model: str
    purpose: str  # one of memory.usage.models.USAGE_PURPOSES
    prompt_tokens: int
    completion_tokens: int
    calls: int = 1
    estimated_calls: int = 0  # of `calls`, how many were counted by us (no API usage)
    cached_tokens: int = 0  # of prompt_tokens, what the provider said it served from cache

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in USAGE_KEY)


@dataclass(frozen=True)
class DaySpend:
    """One day's tokens of a user, of a chat and of everyone (what quotas compare)."""

    user: int = 0
    chat: int = 0
    everyone: int = 0


GroupBy = Literal["user", "chat", "model", "purpose", "day"]
GROUP_BY: tuple[GroupBy, ...] = ("day", "user", "chat", "model", "purpose")


@dataclass(frozen=True)
class UsageTotals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    estimated_calls: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache

    @property
    def tokens(self) -> int:
        """What quotas and `/usage` count: prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def hit_rate(self) -> float:
        """The share of prompt tokens the provider billed as cache hits (0.0 with none)."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True)
class UsageScope:
    """Which rows a read covers: everything, one user, one chat (ids need a platform)."""

    platform: str | None = None
    user_id: str | None = None
    chat_id: str | None = None
    purpose: str | None = None  # one purpose's rows only ("image": the pictures drawn)


@dataclass(frozen=True)
class UsageGroup:
    """One line of a grouped listing: `platform:id` (user, chat), a model, a purpose or an
    ISO day."""

    key: str
    totals: UsageTotals


class UsageSink(Protocol):
    """Where the usage meter adds what model calls cost (memory.usage.store.UsageStore)."""

    async def add(self, deltas: Sequence[UsageDelta]) -> None: ...


class SpendReader(Protocol):
    """One day's spend of a user, a chat and everyone, for the quotas
    (memory.usage.store.UsageStore)."""

    async def spent_on(
        self, day: date, platform: str, chat_id: str, user_id: str, *, everyone: bool = True
    ) -> DaySpend: ...
