"""The one sliding-window counter: events per key within the last `window_s` seconds.

Shared by the per-user rate limit, Telegram's per-chat send budget and the console's
sign-in limit. Memory stays bounded: a key whose events have all expired is forgotten,
and at most `max_keys` keys are kept (the least recently used go first).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from core.clock import Ticker

K = TypeVar("K", bound=Hashable)


class SlidingWindow(Generic[K]):
    """Timestamps of recent events per key, read through `count` and `wait_s`."""

    def __init__(self, window_s: float, *, clock: Ticker, max_keys: int = 10_000) -> None:
        if window_s <= 0 or max_keys < 1:
            raise ValueError("window_s must be > 0 and max_keys >= 1")
        self.window_s = window_s
        self._clock = clock
        self._max_keys = max_keys
        self._events: dict[K, deque[float]] = {}  # least recently used first

    def count(self, key: K) -> int:
        """Events for `key` within the window, as of now."""
        return len(self._recent(key, self._clock()))

    def wait_s(self, key: K, *, limit: int) -> float:
        """Seconds until `key` has fewer than `limit` events in the window (0: now)."""
        now = self._clock()
        events = self._recent(key, now)
        if len(events) < max(1, limit):
            return 0.0
        return max(0.0, events[len(events) - max(1, limit)] + self.window_s - now)

    def add(self, key: K) -> None:
        """One event for `key`, now."""
        now = self._clock()
        events = self._events.pop(key, None) or deque()
        events.append(now)
        self._events[key] = events  # re-inserted: the most recently used is last
        self._forget_idle(now)

    def __len__(self) -> int:
        """Keys tracked (bounded by `max_keys`)."""
        return len(self._events)

    def _recent(self, key: K, now: float) -> deque[float]:
        events = self._events.get(key)
        if events is None:
            return deque()
        while events and events[0] <= now - self.window_s:
            events.popleft()
        return events

    def _forget_idle(self, now: float) -> None:
        for _ in range(2):  # amortised: at most two idle keys per event
            stalest = next(iter(self._events))
            if self._recent(stalest, now):
                break
            del self._events[stalest]
        while len(self._events) > self._max_keys:
            del self._events[next(iter(self._events))]
