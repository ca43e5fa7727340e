"""Every `<when>` form `/remind` documents, parsed (and refused) in a zone with DST.

Europe/Berlin moves from UTC+01:00 to UTC+02:00 at 02:00 on 2026-03-29 and back at 03:00
on 2026-10-25; "now" is the Saturday before the spring change, so repeats cross it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.reminders.cron import CronError, parse_cron
from core.reminders.when import Schedule, WhenError, describe, resolve

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)  # 11:00 in Berlin, a Saturday


def berlin(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=BERLIN).astimezone(UTC)


@pytest.mark.parametrize(
    ("typed", "rule", "first", "rest"),
    [
        ("in 20s tea", "once", NOW + timedelta(seconds=20), "tea"),
        ("in 10m tea", "once", NOW + timedelta(minutes=10), "tea"),
        ("in 2h tea", "once", NOW + timedelta(hours=2), "tea"),
        ("in 3d tea", "once", NOW + timedelta(days=3), "tea"),
        ("10m tea", "once", NOW + timedelta(minutes=10), "tea"),
        ("1h30m tea", "once", NOW + timedelta(minutes=90), "tea"),
        ("in 5 minutes tea", "once", NOW + timedelta(minutes=5), "tea"),
        ("at 12:00 lunch", "once", berlin("2026-03-28 12:00"), "lunch"),
        ("at 09:00 call the bank", "once", berlin("2026-03-29 09:00"), "call the bank"),
        ("tomorrow 09:00 call", "once", berlin("2026-03-29 09:00"), "call"),
        ("tomorrow at 09:00 call", "once", berlin("2026-03-29 09:00"), "call"),
        ("2026-12-01 14:30 dentist", "once", berlin("2026-12-01 14:30"), "dentist"),
        ("2026-12-01T14:30:00+08:00", "once", datetime(2026, 12, 1, 6, 30, tzinfo=UTC), ""),
        ("every day 09:00 stretch", "every day 09:00", berlin("2026-03-29 09:00"), "stretch"),
        ("every monday 09:00 plan", "every monday 09:00", berlin("2026-03-30 09:00"), "plan"),
        ("every mon at 09:00 plan", "every monday 09:00", berlin("2026-03-30 09:00"), "plan"),
        (
            "every weekday 08:30 standup",
            "every weekday 08:30",
            berlin("2026-03-30 08:30"),
            "standup",
        ),
        ("every 2h water", "every 7200s", NOW + timedelta(hours=2), "water"),
        (
            'cron "30 8 * * 1-5" standup',
            'cron "30 8 * * 1-5"',
            berlin("2026-03-30 08:30"),
            "standup",
        ),
    ],
)
def test_every_documented_form_resolves_in_the_chat_zone(
    typed: str, rule: str, first: datetime, rest: str
) -> None:
    resolved = resolve(typed, NOW, BERLIN)
    assert (resolved.schedule.rule, resolved.first_due, resolved.rest) == (rule, first, rest)
    # what is stored reads back as the same schedule
    assert Schedule.from_rule(resolved.schedule.rule) == resolved.schedule


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("yesterday call", "can't read the time"),
        ("soon call", "can't read the time"),
        ("today 09:00 call", "2026-03-28 09:00 (Europe/Berlin) is in the past"),
        ("2025-12-01 14:30 call", "is in the past"),
        ("2026-02-30 14:30 call", "is not a date"),
        ("at 24:00 call", "24:00 is not a time of day"),
        ("every funday 09:00 call", "'funday' is not a day of the week"),
        ("in 0s call", "more than zero"),
        ("2035-01-01 10:00 call", "more than five years ahead"),
        ('cron "61 * * * *" x', "cron minute: 61 is outside 0-59"),
        ('cron "* * *" x', "a cron expression has 5 fields"),
        ('cron "0 0 31 2 *" x', "never fires"),
    ],
)
def test_bad_input_says_what_is_wrong_in_one_line(typed: str, says: str) -> None:
    with pytest.raises(WhenError) as refused:
        resolve(typed, NOW, BERLIN)
    assert says in str(refused.value) and "\n" not in str(refused.value)


NEW_YORK = ZoneInfo("America/New_York")
HUGE = "9" * 5000  # more digits than Python turns into an int

# issue 35, item 7: far dates and huge amounts raised OverflowError (or ValueError) instead
# of the one-line refusal that names the five-year limit.
TOO_FAR = [
    "in 99999999999 days x",
    "in 99999999999d x",
    "in 100000000000000000000 seconds x",
    "in 9999999999999h x",
    f"in {HUGE}s x",
    "every 99999999999 days x",
    "every 100000000000000000000s x",
    "every 999999999999m x",
    "9999-12-31 23:59 x",
    "9999-12-31T23:59-05:00 x",
    f'cron "{HUGE} * * * *" x',
    f'cron "0 */{HUGE}x * * *" x',
    'cron "0-99999999999999999999 * * * *" x',
]


@pytest.mark.parametrize("typed", TOO_FAR)
@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK, ZoneInfo("Pacific/Kiritimati")])
def test_far_dates_and_huge_amounts_get_the_one_line_limit(typed: str, zone: ZoneInfo) -> None:
    with pytest.raises(WhenError) as refused:
        resolve(typed, NOW, zone)
    said = str(refused.value)
    assert "\n" not in said and len(said) < 200
    assert "five years" in said or said.startswith("cron "), said


@pytest.mark.parametrize("typed", ["0001-01-01T00:00+05:00 x", "0001-01-01 00:00 x"])
def test_the_first_possible_date_is_in_the_past(typed: str) -> None:
    with pytest.raises(WhenError, match="is in the past"):
        resolve(typed, NOW, BERLIN)


_PIECES = st.sampled_from(
    [
        "in ", "every ", "at ", "today ", "tomorrow ", "cron \"", "\"", " ", ":", "-", "T", "Z",
        "+", "/", "*", ",", "s", "m", "h", "d", "days", "seconds", "monday ", "weekday ",
        "9999", "0001", "12", "31", "23:59", "00:00", "99999999999", "1" + "0" * 20, HUGE,
        "٣", "²", "\u3000", "x",
    ]
)  # fmt: skip
_WHEN = st.one_of(st.lists(_PIECES, max_size=12).map("".join), st.text(max_size=40))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    typed=_WHEN,
    now=st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    zone=st.sampled_from([BERLIN, NEW_YORK, ZoneInfo("Pacific/Kiritimati"), ZoneInfo("UTC")]),
    whole=st.booleans(),
)
@example(typed="in 99999999999 days x", now=NOW, zone=BERLIN, whole=False)
@example(typed="every 5m x", now=datetime(9999, 12, 30, tzinfo=UTC), zone=BERLIN, whole=False)
@example(typed=f'cron "*/{HUGE} * * * *" x', now=NOW, zone=BERLIN, whole=False)
def test_no_input_raises_anything_but_the_refusal(
    typed: str, now: datetime, zone: ZoneInfo, whole: bool
) -> None:
    try:
        resolved = resolve(typed, now, zone, whole=whole)
    except WhenError as refused:
        assert "\n" not in str(refused)
        return
    assert timedelta(0) < resolved.first_due - now <= timedelta(days=366 * 5)


def test_daily_repeats_keep_the_wall_time_across_both_dst_changes() -> None:
    schedule = resolve("every day 09:00 x", NOW, BERLIN).schedule
    spring = schedule.next_after(berlin("2026-03-28 09:00"), BERLIN)
    assert spring == datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 CEST
    autumn = schedule.next_after(berlin("2026-10-24 09:00"), BERLIN)
    assert autumn == datetime(2026, 10, 25, 8, 0, tzinfo=UTC)  # 09:00 CET again


def test_a_wall_time_in_the_spring_gap_fires_once_after_it_and_the_double_hour_once() -> None:
    schedule = resolve("every day 02:30 x", NOW, BERLIN).schedule
    gap = schedule.next_after(NOW, BERLIN)
    assert gap is not None and gap.astimezone(BERLIN).strftime("%H:%M") == "03:30"
    # 02:30 happens twice on 2026-10-25: the reminder fires the first time only
    first = schedule.next_after(berlin("2026-10-24 12:00"), BERLIN)
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    following = schedule.next_after(first, BERLIN)
    assert following == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_cron_is_matched_in_wall_time_and_either_day_field_may_match() -> None:
    cron = parse_cron("30 8 * * 1-5")
    monday = cron.next_after(NOW, BERLIN)
    assert monday is not None and monday.astimezone(UTC) == berlin("2026-03-30 08:30")
    either = parse_cron("0 12 1 * sun")  # the 1st of the month, or any Sunday
    found = either.next_after(NOW, BERLIN)
    assert found is not None and found.date().isoformat() == "2026-03-29"
    assert parse_cron("*/15 * * * *").minutes == frozenset({0, 15, 30, 45})
    assert parse_cron("0 0 * * 7").weekdays == frozenset({0})
    with pytest.raises(CronError):
        parse_cron("0 0 * * 5-1")


def test_a_repeat_that_was_down_catches_up_only_its_latest_occurrence() -> None:
    schedule = resolve("every 5m x", NOW, BERLIN).schedule
    due = NOW + timedelta(minutes=5)
    latest, skipped = schedule.latest_due(due, due + timedelta(minutes=62), BERLIN)
    assert (latest, skipped) == (due + timedelta(minutes=60), 12)
    daily = resolve("every day 09:00 x", NOW, BERLIN).schedule
    start = berlin("2026-03-29 09:00")
    latest, skipped = daily.latest_due(start, berlin("2026-04-02 10:00"), BERLIN)
    assert (latest, skipped) == (berlin("2026-04-02 09:00"), 4)


def test_the_confirmation_names_the_day_the_zone_and_its_offset() -> None:
    assert describe(berlin("2026-03-28 12:00"), NOW, BERLIN) == "12:00 (Europe/Berlin, UTC+01:00)"
    assert describe(berlin("2026-03-29 09:00"), NOW, BERLIN) == (
        "09:00 tomorrow (Europe/Berlin, UTC+02:00)"
    )
    assert describe(berlin("2026-12-01 14:30"), NOW, BERLIN) == (
        "14:30 on 2026-12-01 (Europe/Berlin, UTC+01:00)"
    )
