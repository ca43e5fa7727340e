"""Per-user rate limit with one polite notice per window.

Why: every answered message costs a model call; one person (or a script behind one
account) must not be able to spend the operator's budget or starve a group. A refused
user is told once per window, not on every message, so the limiter itself cannot be
used to make the bot spam a chat. The dispatcher applies it to every channel
(`[bot] rate_limit_per_min`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

from core.clock import Ticker

RATE_NOTICE = "You're sending messages faster than I can answer. Please wait a minute."


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    notify: bool = False  # refused, and this is the first refusal in the current window
    retry_after_s: float = 0.0


class RateLimiter:
    """Sliding window: at most `limit` events per `window_s` seconds for each key.

    `limit = 0` disables limiting. Memory stays bounded: a key whose events have all
    expired is forgotten, and at most `max_keys` keys are tracked (the stalest go first).
    """

    def __init__(
        self,
        limit: int,
        *,
        window_s: float = 60.0,
        clock: Ticker = time.monotonic,
        max_keys: int = 10_000,
    ) -> None:
        if limit < 0 or window_s <= 0 or max_keys < 1:
            raise ValueError("limit must be >= 0, window_s > 0 and max_keys >= 1")
        self._limit = limit
        self._window = window_s
        self._clock = clock
        self._max_keys = max_keys
        self._events: dict[Hashable, deque[float]] = {}
        self._notified_until: dict[Hashable, float] = {}

    @property
    def enabled(self) -> bool:
        return self._limit > 0

    def check(self, key: Hashable) -> RateDecision:
        """Record one event for `key` if allowed; say whether it is and whether to notify."""
        if not self.enabled:
            return RateDecision(True)
        now = self._clock()
        events = self._events.pop(key, None) or deque()
        while events and events[0] <= now - self._window:
            events.popleft()
        self._events[key] = events  # re-insert: dict order is now least-recently-seen first
        if len(events) < self._limit:
            events.append(now)
            self._evict()
            return RateDecision(True)
        retry_after = max(0.0, events[0] + self._window - now)
        notify = now >= self._notified_until.get(key, float("-inf"))
        if notify:
            self._notified_until[key] = now + retry_after
        return RateDecision(False, notify=notify, retry_after_s=retry_after)

    def _evict(self) -> None:
        now = self._clock()
        for _ in range(2):  # amortised: forget up to two idle keys per event
            stalest = next(iter(self._events))
            events = self._events[stalest]
            if events and events[-1] > now - self._window:
                break
            del self._events[stalest]
            self._notified_until.pop(stalest, None)
        while len(self._events) > self._max_keys:
            stalest = next(iter(self._events))
            del self._events[stalest]
            self._notified_until.pop(stalest, None)
