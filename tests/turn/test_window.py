"""The one sliding-window counter (core/window.py) behind rate limits, pacing and sign-ins."""

from __future__ import annotations

import pytest

from core.window import SlidingWindow
from tests.fakes.manual_clock import ManualTicker


def test_counts_only_events_inside_the_window() -> None:
    clock = ManualTicker()
    window: SlidingWindow[str] = SlidingWindow(60, clock=clock)
    window.add("a")
    clock.now += 30
    window.add("a")
    window.add("b")
    assert window.count("a") == 2 and window.count("b") == 1 and window.count("c") == 0
    clock.now += 30  # the first event of "a" is exactly one window old: it has left
    assert window.count("a") == 1


def test_wait_is_until_the_event_that_frees_room_leaves() -> None:
    clock = ManualTicker()
    window: SlidingWindow[int] = SlidingWindow(60, clock=clock)
    for _ in range(3):
        window.add(7)
        clock.now += 10
    # events at 1000, 1010, 1020; now 1030
    assert window.wait_s(7, limit=4) == 0.0
    assert window.wait_s(7, limit=3) == pytest.approx(30)  # 1000 leaves at 1060
    assert window.wait_s(7, limit=2) == pytest.approx(40)  # 1010 must leave too
    clock.now += 30
    assert window.wait_s(7, limit=3) == 0.0


def test_keys_are_bounded_and_idle_ones_forgotten() -> None:
    clock = ManualTicker()
    window: SlidingWindow[int] = SlidingWindow(60, clock=clock, max_keys=5)
    for key in range(50):
        window.add(key)
    assert len(window) == 5 and window.count(49) == 1 and window.count(0) == 0
    clock.now += 61
    window.add(100)
    window.add(101)
    assert len(window) <= 3  # idle keys go as new ones arrive
    with pytest.raises(ValueError):
        SlidingWindow(0, clock=clock)
