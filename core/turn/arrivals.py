"""One sender's messages in one chat pass the gate in the order they arrived.

Why: a channel hands messages over concurrently, and the gate's ladder awaits (the chat's
settings, the quota) before a message reaches the processor. A quick line that does not
call the bot joins its sender's burst only if the line that called the bot got there
first; decided out of order, it would be kept as mere context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable


class Ticket:
    """A message's place in its sender's line: `wait` for the ones before, `release` once
    this one no longer decides anything the next one depends on."""

    def __init__(self, line: Arrivals, key: Hashable, before: asyncio.Event | None) -> None:
        self._line = line
        self._key = key
        self._before = before
        self.passed = asyncio.Event()

    async def wait(self) -> None:
        if self._before is not None:
            await self._before.wait()

    def release(self) -> None:
        if not self.passed.is_set():
            self.passed.set()
            self._line.forget(self._key, self)


class Arrivals:
    """The last ticket of each key with one still unreleased (bounded by the keys busy now)."""

    def __init__(self) -> None:
        self._last: dict[Hashable, Ticket] = {}

    def ticket(self, key: Hashable) -> Ticket:
        """A place after every earlier message of `key`; take it before any await."""
        last = self._last.get(key)
        ticket = Ticket(self, key, last.passed if last is not None else None)
        self._last[key] = ticket
        return ticket

    def forget(self, key: Hashable, ticket: Ticket) -> None:
        if self._last.get(key) is ticket:
            del self._last[key]
