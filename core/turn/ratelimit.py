"""Per-user rate limit with one polite notice per window.

Why: every answered message costs a model call; one person (or a script behind one
account) must not be able to spend the operator's budget or starve a group. A refused
user is told once per window, not on every message, so the limiter itself cannot be
used to make the bot spam a chat. The dispatcher applies it to every channel
(`[bot] rate_limit_per_min`).
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass

from cachetools import LRUCache

from core.clock import Ticker
from core.window import SlidingWindow

RATE_NOTICE = "You're sending messages faster than I can answer. Please wait a minute."


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    notify: bool = False  # refused, and this is the first refusal in the current window
    retry_after_s: float = 0.0


class RateLimiter:
    """At most `limit` events per `window_s` seconds for each key (core/window.py counts).

    `limit = 0` disables limiting. A refused key is told once per window: the notice
    marks are kept for as many keys as the window tracks, and go with them.
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
        self._clock = clock
        self._window: SlidingWindow[Hashable] = SlidingWindow(
            window_s, clock=clock, max_keys=max_keys
        )
        self._notified_until: LRUCache[Hashable, float] = LRUCache(maxsize=max_keys)

    @property
    def enabled(self) -> bool:
        return self._limit > 0

    @property
    def tracked(self) -> int:
        """Keys remembered now (bounded by `max_keys`)."""
        return len(self._window)

    def check(self, key: Hashable) -> RateDecision:
        """Record one event for `key` if allowed; say whether it is and whether to notify."""
        if not self.enabled:
            return RateDecision(True)
        retry_after = self._window.wait_s(key, limit=self._limit)
        if retry_after <= 0:
            self._window.add(key)
            return RateDecision(True)
        now = self._clock()
        notify = now >= self._notified_until.get(key, float("-inf"))
        if notify:
            self._notified_until[key] = now + retry_after
        return RateDecision(False, notify=notify, retry_after_s=retry_after)
