"""When the bot may consider speaking up unasked in a group: the chime-in windows.

The budget is the promise: at most one decision per `gap` seconds in a chat, whatever
the traffic, and the window right after the bot chimed in passes without one. It is pure
bookkeeping over a clock, so the bound can be checked on a simulated clock.

A decision is made when an unaddressed message arrives and the gap since the chat's last
decision has passed; the messages since that decision are the batch it reads. No timer
runs: a quiet chat costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from cachetools import LRUCache

from memory.chats.types import ChatKey

ChimeLevel = Literal["off", "low", "normal"]
CHIME_LEVELS: tuple[ChimeLevel, ...] = ("off", "low", "normal")
DEFAULT_GAP_S: dict[ChimeLevel, float] = {"low": 120.0, "normal": 45.0}
CHATS_KEPT = 10_000  # chats whose windows are remembered, most recently heard first


def chime_level(value: str | None, default: ChimeLevel = "off") -> ChimeLevel:
    """A stored or configured level as a ChimeLevel (unknown or None: `default`)."""
    for level in CHIME_LEVELS:
        if value == level:
            return level
    return default


@dataclass
class _Window:
    opened_at: float | None = None  # when the last decision was made (None: never)
    heard: int = 0  # unaddressed messages since then: the batch the next decision reads
    spoke: bool = False  # the last decision spoke: the next window passes silently


class ChimeWindows:
    """Per chat: is this unaddressed message the one that opens a decision?

    `clock` gives seconds (monotonic, or a simulated clock in the bench and tests);
    `gap_s` > 0 overrides the levels' own gaps (DEFAULT_GAP_S).
    """

    def __init__(
        self, clock: Callable[[], float], *, gap_s: float = 0.0, chats: int = CHATS_KEPT
    ) -> None:
        self._clock = clock
        self._gap_override = gap_s
        self._windows: LRUCache[ChatKey, _Window] = LRUCache(maxsize=chats)
        self.decisions = 0  # decisions opened so far (the bench counts them)

    def gap(self, level: ChimeLevel) -> float:
        if self._gap_override > 0:
            return self._gap_override
        return DEFAULT_GAP_S.get(level, 0.0)

    def heard(self, chat: ChatKey, level: ChimeLevel) -> int:
        """Count one unaddressed message; returns the batch size when a decision is due
        now (the caller makes it), else 0. Synchronous, so two messages arriving at once
        can never both open a decision."""
        if level == "off":
            return 0
        window = self._windows.get(chat)
        if window is None:
            window = self._windows[chat] = _Window()
        window.heard += 1
        now = self._clock()
        if window.opened_at is not None and now - window.opened_at < self.gap(level):
            return 0
        window.opened_at, batch, window.heard = now, window.heard, 0
        if window.spoke:  # never twice in a row: this window passes without a call
            window.spoke = False
            return 0
        self.decisions += 1
        return batch

    def spoke(self, chat: ChatKey) -> None:
        """The decision just made said something: the next window is a silent one."""
        window = self._windows.get(chat)
        if window is not None:
            window.spoke = True
