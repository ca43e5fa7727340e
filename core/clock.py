"""The daemon's one idea of time: a Clock to read and wait on, and the UTC wall clock.

Why one module: pacing, presence and the model's fallback read monotonic time and wait;
usage days, quotas, recovery and console sessions read the UTC wall clock. Tests pass one
fake (tests/fakes/manual_clock.py) wherever a Clock is taken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Where code that paces itself reads the time and waits; tests pass a fake one."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock: monotonic time and asyncio.sleep."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


# Monotonic seconds, for code that only reads elapsed time (cool-downs, rate windows,
# caches): time.monotonic, or a test's own callable.
Ticker = Callable[[], float]

# Aware UTC "now": usage days, quotas, recovery ages, console sessions. A test injects
# its own to cross midnight or expire a session.
WallClock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)
