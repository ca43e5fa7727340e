"""The tests' clocks: time moves only when the test says so, so nothing really sleeps.

ManualClock for code that paces itself (a Clock with monotonic() and sleep());
ManualTicker for code that only reads elapsed seconds (a Ticker); ManualWallClock for
code that reads the UTC wall clock (usage days, quotas, reminders, sessions)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class ManualClock:
    """Monotonic time that moves only when a test says so: never a real sleep.

    Manual (default): `sleep` waits until `advance` has moved the time past its end; a
    test that advances only after the sends it expects have arrived reads exact times.
    Auto: `sleep` moves the time to its end at once, so nothing waits (pacing rules are
    lower bounds, checked exactly on the virtual timestamps the fake Bot API records
    when given `clock=clock.monotonic`). Times recorded
    are exact only while each send is answered before the next one is queued (one
    reply's pieces); sends queued together may be stamped after the clock moved on.
    """

    def __init__(self, start: float = 1000.0, *, auto: bool = False, gated: bool = False) -> None:
        self.now = start
        self.auto = auto
        # gated: every sleep first waits until the test sets `gate`, to decide exactly
        # when a delayed action (the ack reaction) looks at the world.
        self.gated = gated
        self.gate = asyncio.Event()
        self.sleeps: list[float] = []  # every sleep asked for, in seconds
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if self.gated:
            await self.gate.wait()
        self.sleeps.append(seconds)
        until = self.now + max(seconds, 0.0)
        if self.auto:
            self.now = max(self.now, until)
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (until, waiter)
        self._sleepers.append(entry)
        try:
            await waiter
        finally:
            self._sleepers.remove(entry)

    @property
    def sleeping(self) -> int:
        return len(self._sleepers)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for until, waiter in list(self._sleepers):
            if until <= self.now and not waiter.done():
                waiter.set_result(None)


class ManualTicker:
    """Monotonic seconds (core.clock.Ticker) that move only when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ManualWallClock:
    """Aware UTC time (core.clock.WallClock) that moves only when the test says so."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)
