"""A five-field cron expression (`minute hour day-of-month month day-of-week`), in wall time.

Why our own: the rule is small (lists, ranges, steps, `*`, names for months and days) and
the one thing a library gets wrong for us, the time zone, is ours to decide: fields are
matched against the chat's local wall clock, so `30 8 * * 1-5` is 08:30 there in summer
and in winter. Like Vixie cron, when both day fields are restricted either may match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
SEARCH_DAYS = 366 * 5  # `0 0 29 2 *` needs up to eight years; five is plenty for others


class CronError(ValueError):
    """An expression that is not five valid fields; str() says which and why."""


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_any: bool
    weekdays_any: bool
    text: str

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.days_any or self.weekdays_any:
            return dom and dow
        return dom or dow

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        """The first matching wall time strictly after `after` (aware), as an aware
        datetime in `zone`; None when nothing matches within five years."""
        try:
            return self._search(after, zone)
        except OverflowError:  # the search ran past 9999-12-31: nothing there
            return None

    def _search(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        local = after.astimezone(zone)
        day = local.date()
        for _ in range(SEARCH_DAYS):
            if self.day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        moment = datetime.combine(day, time(hour, minute), tzinfo=zone)
                        if moment > after:
                            return moment
            day += timedelta(days=1)
        return None


def _number(text: str) -> int | None:
    """ASCII digits as an int, else None; a longer number than any field allows is cut to
    one that is still out of range (int() refuses 4,300 digits; `²`.isdigit() is true)."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 6 else 10**6


def _value(text: str, low: int, high: int, names: tuple[str, ...] | None, field: str) -> int:
    value = _number(text)
    if names is not None and text.casefold()[:3] in names and value is None:
        index = names.index(text.casefold()[:3])
        return index + (1 if names is MONTHS else 0)
    if value is None:
        raise CronError(f"cron {field}: {text[:20]!r} is not a number")
    if field == "day-of-week" and value == 7:
        return 0  # both 0 and 7 are Sunday
    if not low <= value <= high:
        raise CronError(f"cron {field}: {value} is outside {low}-{high}")
    return value


def _field(
    text: str, low: int, high: int, field: str, names: tuple[str, ...] | None = None
) -> set[int]:
    found: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = 1
        if step_text:
            given = _number(step_text)
            if given is None or given < 1:
                raise CronError(f"cron {field}: step {step_text[:20]!r} must be a positive number")
            step = given
        if body == "*":
            start, end = low, high
        elif "-" in body:
            first, _, last = body.partition("-")
            start = _value(first, low, high, names, field)
            end = _value(last, low, high if field != "day-of-week" else 7, names, field)
            if field == "day-of-week" and last == "7":
                end = 7
            if end < start:
                raise CronError(f"cron {field}: range {body!r} runs backwards")
        else:
            start = _value(body, low, high, names, field)
            end = high if step_text else start
        for value in range(start, end + 1, step):
            found.add(0 if field == "day-of-week" and value == 7 else value)
    return found


def parse_cron(text: str) -> Cron:
    """Parse `m h dom mon dow`; CronError names the field that is wrong."""
    fields = text.split()
    if len(fields) != 5:
        raise CronError(
            f"a cron expression has 5 fields (minute hour day month weekday), not {len(fields)}"
        )
    minute, hour, dom, month, dow = fields
    return Cron(
        minutes=frozenset(_field(minute, 0, 59, "minute")),
        hours=frozenset(_field(hour, 0, 23, "hour")),
        days=frozenset(_field(dom, 1, 31, "day-of-month")),
        months=frozenset(_field(month, 1, 12, "month", MONTHS)),
        weekdays=frozenset(_field(dow, 0, 6, "day-of-week", DAYS)),
        days_any=dom == "*",
        weekdays_any=dow == "*",
        text=" ".join(fields),
    )
