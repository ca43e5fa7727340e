"""Bursts: one sender's quick messages in one chat, answered as one turn.

Why: people type a thought as several messages ("hey bot", "look at this", a picture,
"what is it?"); answering each alone costs a model call per fragment and replies to
half a question. Each message is still accepted durably on arrival (the intake); this
only decides which accepted messages one answer settles. The first message of a burst
leads: it waits while more keep coming within `window` of each other, never longer than
`max` from the first, then answers them all. In a group only a message that calls the bot
starts a burst; the same sender's next messages join it whether or not they call it. A
message that comes after the leader stopped waiting starts the next burst (it is the next
turn, never lost).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from core.messages import ChatType
from memory.chats.types import ChatKey
from memory.turns.types import IntakeEntry

T = TypeVar("T")
# A platform's message time may be whole seconds (Telegram's `date`): recovery allows
# this much more between two stored arrival times than the live window.
TIMESTAMP_SLACK_S = 1.0


@dataclass(frozen=True)
class BurstWindow:
    """One kind of chat's `burst_ms` (0: off) and `burst_max_ms` (`[groups]`, `[private]`)."""

    ms: int = 0
    max_ms: int = 6000


@dataclass(frozen=True)
class BurstOptions:
    """The burst window of groups and of private chats."""

    group: BurstWindow = BurstWindow()
    private: BurstWindow = BurstWindow()

    def of(self, chat_type: ChatType | str) -> BurstWindow:
        return self.group if ChatType(chat_type) is ChatType.GROUP else self.private

    def window_s(self, chat_type: ChatType | str) -> float:
        """How long a burst in this kind of chat waits for its sender's next message."""
        return self.of(chat_type).ms / 1000.0

    def max_s(self, chat_type: ChatType | str) -> float:
        """The longest a burst in this kind of chat waits from its first message."""
        return self.of(chat_type).max_ms / 1000.0


@dataclass
class Burst(Generic[T]):
    """The items of one burst, gathered while its leader waits."""

    window_s: float
    max_s: float
    items: list[T] = field(default_factory=list)
    first_at: float = 0.0
    last_at: float = 0.0
    open: bool = True
    held: int = 0  # messages on their way in (being stored) that will join it
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, item: T, now: float) -> None:
        self.items.append(item)
        self.last_at = now
        self.arrived.set()

    def let_go(self) -> None:
        """A held message joined (or will not): the burst may close without it."""
        self.held = max(0, self.held - 1)
        self.arrived.set()

    def deadline(self) -> float:
        return min(self.last_at + self.window_s, self.first_at + self.max_s)


class Bursts(Generic[T]):
    """The open bursts of this process, one per (chat, sender) at most."""

    def __init__(self) -> None:
        self._open: dict[tuple[ChatKey, str], Burst[T]] = {}

    def join(
        self, chat: ChatKey, sender: str, item: T, window_s: float, max_s: float
    ) -> Burst[T] | None:
        """Add `item` to its sender's open burst (None: its leader answers it), or start
        a new burst that the caller leads (returned: `await collect(burst)` it)."""
        now = asyncio.get_running_loop().time()
        key = (chat, sender)
        burst = self._open.get(key)
        if burst is not None and burst.open and now < burst.first_at + burst.max_s:
            burst.add(item, now)
            return None
        burst = Burst(window_s, max_s, first_at=now)
        burst.add(item, now)
        self._open[key] = burst
        return burst

    def gathering(self, chat: ChatKey, sender: str) -> bool:
        """The sender's burst in this chat still takes messages."""
        burst = self._open.get((chat, sender))
        now = asyncio.get_running_loop().time()
        return burst is not None and burst.open and now < burst.deadline()

    def hold(self, chat: ChatKey, sender: str) -> Burst[T] | None:
        """The sender's burst still gathering, held open for one message on its way in:
        a message that does not call the bot joins only a burst its sender started with
        one that did. None when there is none. The caller adds the message (`add`) or
        gives up (`let_go`), once."""
        if not self.gathering(chat, sender):
            return None
        burst = self._open[(chat, sender)]
        burst.held += 1
        return burst

    async def join_late(
        self, chat: ChatKey, sender: str, arrive: Callable[[], Awaitable[T | None]]
    ) -> bool:
        """Hold the sender's gathering burst open while `arrive` stores a message, then add
        it (None: a duplicate, nothing to add). False, with nothing called, when no burst
        of the sender's is gathering."""
        burst = self.hold(chat, sender)
        if burst is None:
            return False
        try:
            item = await arrive()
            if item is not None:
                burst.add(item, asyncio.get_running_loop().time())
        finally:
            burst.let_go()
        return True

    async def collect(self, chat: ChatKey, sender: str, burst: Burst[T]) -> list[T]:
        """Wait until the sender paused for the window (or the burst reached its max),
        then close it: later messages start the next burst. Returns its items in order."""
        loop = asyncio.get_running_loop()
        try:
            while (left := burst.deadline() - loop.time()) > 0 or burst.held:
                burst.arrived.clear()
                try:
                    await asyncio.wait_for(burst.arrived.wait(), max(left, 0.05))
                except TimeoutError:
                    pass
        finally:
            burst.open = False
            if self._open.get((chat, sender)) is burst:
                del self._open[(chat, sender)]
        return list(burst.items)


def leading_burst(entries: Sequence[IntakeEntry], options: BurstOptions) -> list[IntakeEntry]:
    """Recovery's rule for accepted messages a dead process left pending: the first entry
    and the ones after it from the same sender that came within the chat's window of the
    one before (and within the max of the first), as the live path would have merged."""
    if not entries:
        return []
    first = entries[0]
    taken = [first]
    window = options.window_s(first.chat_type)
    longest = options.max_s(first.chat_type)
    if window <= 0:
        return taken
    for entry in entries[1:]:
        gap = (entry.received_at - taken[-1].received_at).total_seconds()
        span = (entry.received_at - first.received_at).total_seconds()
        same = entry.sender_id == first.sender_id and entry.chat_key == first.chat_key
        late = gap > window + TIMESTAMP_SLACK_S or span > longest + TIMESTAMP_SLACK_S
        if not same or entry.state != "pending" or late:
            break
        taken.append(entry)
    return taken


def in_arrival_order(entries: Sequence[IntakeEntry]) -> list[IntakeEntry]:
    """A burst's rows as the sender sent them. Row ids follow the order the inserts ran
    in, which two messages handled at once (PostgreSQL) can swap; the platform's time and
    then its message number (Telegram's and QQ's grow) say the order they were sent."""
    return sorted(entries, key=sent_order)


def sent_order(entry: IntakeEntry) -> tuple[datetime, int, int]:
    """The sort key of `in_arrival_order` (the live path sorts a burst's items by it too)."""
    number = entry.platform_message_id or ""
    return entry.received_at, int(number) if number.isdigit() else 0, entry.id
