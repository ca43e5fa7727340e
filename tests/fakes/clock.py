"""Clocks for pacing tests (channels.telegram.pacing.Clock), so nothing sleeps for real.

`VirtualClock`: `sleep(s)` moves virtual time forward by `s` at once and yields to the
loop. Pacing rules are lower bounds ("at most one edit a second", "20 a minute"), so
they can be checked exactly on the virtual timestamps of the calls the fake Bot API
saw (give it `clock=virtual.monotonic`).

`GateClock`: `sleep` waits until the test opens the gate, to decide exactly when a
delayed action (the ack reaction) looks at the world.
"""

from __future__ import annotations

import asyncio


class VirtualClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds > 0:
            self.now += seconds
        await asyncio.sleep(0)


class GateClock(VirtualClock):
    def __init__(self, start: float = 1000.0) -> None:
        super().__init__(start)
        self.gate = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        await self.gate.wait()
        await super().sleep(seconds)
