"""Pure parts the Telegram channel is built from: name cleaning, rate limiting, splitting,
malformed-update filtering. (names and ratelimit are generic; QQ reuses them.)"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels.names import MAX_NAME_CHARS, clean_display_name
from channels.telegram.outbound import split_for_telegram
from channels.telegram.polling import sanitise_updates
from core.ratelimit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\u202eevil\u202c", "evil"),  # right-to-left override: gone
        ("\u2066Bob\u2069 \u200f", "Bob"),  # isolates and marks
        ("line\nbreak\tand\x00nul", "line break and nul"),
        ("  lots   of    space ", "lots of space"),
        ("\u05e9\u05dc\u05d5\u05dd", "\u05e9\u05dc\u05d5\u05dd"),  # Hebrew stays
        (
            "\u0645\u0631\u062d\u0628\u0627 🌙",
            "\u0645\u0631\u062d\u0628\u0627 🌙",
        ),  # Arabic + emoji
        ("👨\u200d👩\u200d👧 family", "👨\u200d👩\u200d👧 family"),  # ZWJ sequence kept
        ("zero\u200bwidth\ufeff", "zerowidth"),
        ("bad\ud800surrogate", "badsurrogate"),
    ],
)
def test_clean_display_name(raw: str, expected: str) -> None:
    assert clean_display_name(raw) == expected


def test_clean_display_name_fallbacks_and_cap() -> None:
    assert clean_display_name("\u202e\u200b\n", fallback="1234") == "1234"
    assert clean_display_name(None, fallback="x") == "x"
    assert clean_display_name("é" * 100) == "é" * MAX_NAME_CHARS
    cut = clean_display_name("a" * 62 + "👩\u200d👩\u200d👦")
    assert len(cut) <= MAX_NAME_CHARS and not cut.endswith("\u200d")
    with pytest.raises(ValueError):
        clean_display_name("x", limit=0)


@given(st.text())
def test_clean_display_name_is_always_safe(raw: str) -> None:
    name = clean_display_name(raw, fallback="?")
    assert 1 <= len(name) <= MAX_NAME_CHARS
    name.encode("utf-8")  # no lone surrogates survive
    assert not any(c in name for c in "\n\r\x00\u202e\u202d\u2066\u2067\u2068\u2069")


# -- rate limit ----------------------------------------------------------------------


def test_rate_limit_notifies_once_per_window_then_recovers() -> None:
    clock = Clock()
    limiter = RateLimiter(2, window_s=60, clock=clock)
    assert limiter.check("u").allowed and limiter.check("u").allowed
    refused = limiter.check("u")
    assert not refused.allowed and refused.notify and refused.retry_after_s == pytest.approx(60)
    clock.now += 30
    again = limiter.check("u")
    assert not again.allowed and not again.notify  # one notice per window, not per message
    assert limiter.check("other").allowed  # per user
    clock.now += 31
    assert limiter.check("u").allowed
    assert limiter.check("u").allowed
    late = limiter.check("u")
    assert not late.allowed and late.notify  # a new window may notify again


def test_rate_limit_zero_disables_and_memory_is_bounded() -> None:
    unlimited = RateLimiter(0)
    assert not unlimited.enabled
    assert all(unlimited.check("u").allowed for _ in range(1000))
    clock = Clock()
    limiter = RateLimiter(1, window_s=60, clock=clock, max_keys=10)
    for n in range(100):
        limiter.check(n)
    assert len(limiter._events) <= 10
    clock.now += 61
    for n in range(100, 110):
        limiter.check(n)  # idle keys are forgotten as new ones arrive
    assert len(limiter._events) <= 10
    with pytest.raises(ValueError):
        RateLimiter(-1)


# -- splitting -----------------------------------------------------------------------


def test_split_counts_utf16_units_for_emoji() -> None:
    text = "😀" * 3000  # 3000 characters but 6000 UTF-16 units: over Telegram's limit
    pieces = split_for_telegram(text)
    assert len(pieces) >= 2 and "".join(pieces) == text
    assert all(len(p.encode("utf-16-le")) // 2 <= 4096 for p in pieces)
    assert split_for_telegram("short") == ["short"]
    assert split_for_telegram("   ") == []


# -- malformed updates ---------------------------------------------------------------


def test_sanitise_updates_keeps_offsets_moving(caplog) -> None:
    caplog.set_level(logging.WARNING)
    good = {
        "update_id": 3,
        "message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}, "text": "hi"},
    }
    result = sanitise_updates(
        [
            {"update_id": 1, "message": {"message_id": 1}},
            "garbage",
            {"update_id": "2"},
            good,
        ]
    )
    assert result == [{"update_id": 1}, good]
    assert "ignored malformed update 1" in caplog.text
    assert caplog.text.count("without an update_id") == 2
