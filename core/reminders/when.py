"""`<when>`: the times a reminder understands, resolved in the chat's time zone.

One-shot: `in 20s` / `in 10m` / `in 2h` / `in 3d` (also without `in`, and combined like
`1h30m`), `at 09:00` (the next 09:00), `today 09:00`, `tomorrow 09:00`,
`2026-12-01 14:30`, or an ISO time with an offset (`2026-12-01T14:30:00+08:00`, for
the model's tool). Repeating: `every day 09:00`, `every monday 09:00` (any day name,
`mon`..`sun`), `every weekday 08:30` (Monday to Friday), `every 2h` (elapsed time; `d`
keeps the wall-clock time), `cron "30 8 * * 1-5"`.

Why wall time: "every day at 09:00" in Europe/Berlin is 09:00 there in summer and in
winter, so repeats are computed on the local calendar and only then turned into UTC. A
wall time that does not exist on a spring-forward day fires at the same offset past the
gap (02:30 becomes 03:30); one that happens twice in autumn fires the first time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from core.reminders.cron import CronError, parse_cron

Kind = Literal["once", "every", "days", "daily", "weekly", "cron"]
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_WORDS = {
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
    "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
}  # fmt: skip
DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MAX_AHEAD = timedelta(days=366 * 5)
TOO_FAR = "that is more than five years ahead"
# An amount longer than this many digits is past the limit whatever its unit: checked
# before int(), which refuses over 4,300 digits, and before timedelta, which overflows.
_MAX_DIGITS = 12

_CLOCK = r"(?:at\s+)?(?P<clock>\d{1,2}:\d{2})"
_AMOUNT = r"\d+\s*(?:seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)"
_FORMS = [
    ("cron", re.compile(r'cron\s+"(?P<cron>[^"]*)"', re.I)),
    ("every_day", re.compile(rf"every\s+(?:day|daily)\s+{_CLOCK}", re.I)),
    ("every_weekday", re.compile(rf"every\s+(?:weekday|workday)\s+{_CLOCK}", re.I)),
    ("every_named", re.compile(rf"every\s+(?P<day>[a-z]+)\s+{_CLOCK}", re.I)),
    ("every_n", re.compile(rf"every\s+(?P<amount>{_AMOUNT}(?:\s*{_AMOUNT})*)", re.I)),
    (
        "iso",
        re.compile(
            r"(?P<iso>\d{4}-\d{2}-\d{2}T\d{1,2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)", re.I
        ),
    ),
    ("date", re.compile(rf"(?P<date>\d{{4}}-\d{{2}}-\d{{2}})\s+{_CLOCK}", re.I)),
    ("tomorrow", re.compile(rf"tomorrow\s+{_CLOCK}", re.I)),
    ("today", re.compile(rf"today\s+{_CLOCK}", re.I)),
    ("at", re.compile(r"at\s+(?P<clock>\d{1,2}:\d{2})", re.I)),
    ("in", re.compile(rf"(?:in\s+)?(?P<amount>{_AMOUNT}(?:\s*{_AMOUNT})*)", re.I)),
]
_END = re.compile(r"(?=\s|$)")
_AMOUNT_PART = re.compile(r"(\d+)\s*([a-z]+)", re.I)

FORMS_HELP = (
    "in 20s | in 10m | in 2h | in 3d | at 09:00 | tomorrow 09:00 | 2026-12-01 14:30 | "
    'every day 09:00 | every monday 09:00 | every weekday 08:30 | every 2h | cron "30 8 * * 1-5"'
)


class WhenError(ValueError):
    """A `<when>` that cannot be used; str() is one line saying what is wrong."""


@dataclass(frozen=True)
class Schedule:
    """When a reminder fires. `rule` is the canonical text stored with it (`once` for a
    one-shot, whose time is the stored due time) and read back by `from_rule`."""

    kind: Kind
    rule: str
    seconds: int = 0  # every: elapsed; days: the number of days
    clock: time | None = None  # daily / weekly wall time
    weekdays: frozenset[int] = frozenset()  # weekly: 0 = Monday
    cron: str = ""

    @property
    def repeats(self) -> bool:
        return self.kind != "once"

    def min_gap_s(self) -> int:
        """The shortest time between two occurrences (for `[reminders] min_interval_s`)."""
        if self.kind == "every":
            return self.seconds
        if self.kind == "cron":
            return 60
        return 86400 if self.kind != "once" else 0

    def next_after(self, moment: datetime, zone: ZoneInfo) -> datetime | None:
        """The first occurrence strictly after `moment`, in UTC; None for a one-shot."""
        if self.kind == "once":
            return None
        try:
            return self._next_after(moment, zone)
        except OverflowError:  # past 9999-12-31: never, as far as the calendar goes
            return None

    def _next_after(self, moment: datetime, zone: ZoneInfo) -> datetime | None:
        if self.kind == "every":
            return (moment + timedelta(seconds=self.seconds)).astimezone(UTC)
        if self.kind == "days":
            local = moment.astimezone(zone)
            day = local.date() + timedelta(days=self.seconds)
            return _wall(day, local.time().replace(tzinfo=None), zone)
        if self.kind == "cron":
            found = parse_cron(self.cron).next_after(moment, zone)
            return found.astimezone(UTC) if found is not None else None
        assert self.clock is not None
        day = moment.astimezone(zone).date()
        for _ in range(9):
            if self.kind == "daily" or day.weekday() in self.weekdays:
                candidate = _wall(day, self.clock, zone)
                if candidate > moment:
                    return candidate
            day += timedelta(days=1)
        return None  # pragma: no cover - a weekday always comes within a week

    def latest_due(self, due: datetime, now: datetime, zone: ZoneInfo) -> tuple[datetime, int]:
        """From occurrence `due` (<= now): the latest occurrence not after `now` and how
        many earlier ones it skips, so a repeat that was down catches up at most once."""
        if self.kind == "every" and self.seconds > 0:
            skipped = int((now - due).total_seconds() // self.seconds)
            return due + timedelta(seconds=self.seconds * skipped), skipped
        skipped = 0
        while True:
            following = self.next_after(due, zone)
            if following is None or following > now or skipped > 100_000:
                return due, skipped
            due, skipped = following, skipped + 1

    @classmethod
    def from_rule(cls, rule: str) -> Schedule:
        """The schedule a stored rule text names (the inverse of `.rule`)."""
        if rule == "once":
            return cls("once", "once")
        epoch = datetime(2000, 1, 1, tzinfo=UTC)
        schedule, rest = parse_when(rule, epoch, ZoneInfo("UTC"), whole=True)
        return schedule


def _wall(day: date, clock: time, zone: ZoneInfo) -> datetime:
    """The wall time `clock` on `day` in `zone`, as UTC (fold 0: the first of two).

    OverflowError when that is outside the calendar in UTC (9999-12-31 west of Greenwich)."""
    local = datetime.combine(day, clock, tzinfo=zone)
    # A time in a spring-forward gap: normalise through UTC (02:30 -> 03:30).
    return local.astimezone(UTC)


def _utc(moment: datetime) -> datetime:
    """`moment` in UTC; a time outside the calendar there is refused by the limit it
    breaks (year 9999 is more than five years ahead, year 1 is in the past)."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        if moment.year > 5000:
            raise WhenError(TOO_FAR) from None
        raise WhenError(f"{moment.date().isoformat()} is in the past") from None


def _plus(now: datetime, seconds: int) -> datetime:
    """`now` + `seconds`; beyond year 9999 is beyond the limit too."""
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        raise WhenError(TOO_FAR) from None


def _clock(text: str) -> time:
    hour, minute = (int(part) for part in text.split(":"))
    if hour > 23 or minute > 59:
        raise WhenError(f"{text} is not a time of day (00:00 to 23:59)")
    return time(hour, minute)


def _amount_seconds(text: str) -> int:
    """The amount in seconds; WhenError (the five-year limit) when it is longer than that,
    however many digits were typed."""
    total = 0
    for number, unit in _AMOUNT_PART.findall(text):
        if len(number.lstrip("0")) > _MAX_DIGITS:
            raise WhenError(TOO_FAR)
        total += int(number) * UNITS[_UNIT_WORDS[unit.casefold()]]
    if total > MAX_AHEAD.total_seconds():
        raise WhenError(TOO_FAR)
    return total


@dataclass(frozen=True)
class Resolved:
    """A parsed `<when>`: the schedule, its first occurrence (UTC), and the text after it."""

    schedule: Schedule
    first_due: datetime
    rest: str


def parse_when(
    text: str, now: datetime, zone: ZoneInfo, *, whole: bool = False
) -> tuple[Schedule, str]:
    """The schedule at the start of `text` and what follows it (the reminder's text).

    `whole`: the whole text must be the `<when>`. Raises WhenError.
    """
    resolved = resolve(text, now, zone, whole=whole)
    return resolved.schedule, resolved.rest


def resolve(text: str, now: datetime, zone: ZoneInfo, *, whole: bool = False) -> Resolved:
    """Parse the leading `<when>` of `text` and work out its first occurrence after `now`.

    Raises WhenError (one line) for an unknown form, an impossible or past time, or a
    time more than five years ahead."""
    text = text.strip()
    for name, pattern in _FORMS:
        match = pattern.match(text)
        if match is None or not _END.match(text, match.end()):
            continue
        rest = text[match.end() :].strip()
        if whole and rest:
            continue
        try:
            schedule, first = _build(name, match, now, zone)
        except OverflowError:  # `now` itself at the calendar's edge: nothing fits after it
            raise WhenError(TOO_FAR) from None
        if first is None:
            raise WhenError("that schedule never fires in the next five years")
        if first <= now:
            shown = first.astimezone(zone).strftime("%Y-%m-%d %H:%M")
            raise WhenError(f"{shown} ({zone.key}) is in the past")
        if first - now > MAX_AHEAD:
            raise WhenError(TOO_FAR)
        return Resolved(schedule, first.astimezone(UTC), rest)
    raise WhenError(f"I can't read the time in {text[:40]!r}; use one of: {FORMS_HELP}")


def _build(
    name: str, match: re.Match[str], now: datetime, zone: ZoneInfo
) -> tuple[Schedule, datetime | None]:
    local_now = now.astimezone(zone)
    groups = match.groupdict()
    if name == "cron":
        expression = groups["cron"].strip()
        try:
            cron = parse_cron(expression)
        except CronError as exc:
            raise WhenError(str(exc)) from None
        schedule = Schedule("cron", f'cron "{cron.text}"', cron=cron.text)
        return schedule, schedule.next_after(now, zone)
    if name in ("every_day", "every_weekday", "every_named"):
        clock = _clock(groups["clock"])
        hhmm = clock.strftime("%H:%M")
        if name == "every_day":
            schedule = Schedule("daily", f"every day {hhmm}", clock=clock)
        elif name == "every_weekday":
            days = frozenset(range(5))
            schedule = Schedule("weekly", f"every weekday {hhmm}", clock=clock, weekdays=days)
        else:
            weekday = _day_name(groups["day"])
            schedule = Schedule(
                "weekly",
                f"every {DAY_NAMES[weekday]} {hhmm}",
                clock=clock,
                weekdays=frozenset({weekday}),
            )
        return schedule, schedule.next_after(now, zone)
    if name == "every_n":
        seconds = _amount_seconds(groups["amount"])
        if seconds <= 0:
            raise WhenError("a repeat needs a positive interval, e.g. every 2h")
        if seconds % 86400 == 0:
            schedule = Schedule("days", f"every {seconds // 86400}d", seconds=seconds // 86400)
        else:
            schedule = Schedule("every", f"every {seconds}s", seconds=seconds)
        return schedule, schedule.next_after(now, zone)
    once = Schedule("once", "once")
    if name == "in":
        seconds = _amount_seconds(groups["amount"])
        if seconds <= 0:
            raise WhenError("the delay must be more than zero, e.g. in 10m")
        return once, _plus(now, seconds)
    if name == "iso":
        try:
            moment = datetime.fromisoformat(groups["iso"].replace("z", "Z"))
        except ValueError:
            raise WhenError(f"{groups['iso']} is not a valid date and time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone)
        return once, _utc(moment)
    clock = _clock(groups["clock"])
    if name == "date":
        try:
            day = date.fromisoformat(groups["date"])
        except ValueError:
            raise WhenError(f"{groups['date']} is not a date") from None
        return once, _utc(datetime.combine(day, clock, tzinfo=zone))
    if name == "tomorrow":
        return once, _wall(local_now.date() + timedelta(days=1), clock, zone)
    if name == "today":
        return once, _wall(local_now.date(), clock, zone)
    # `at HH:MM`: the next such wall time, today or tomorrow
    today = _wall(local_now.date(), clock, zone)
    if today > now:
        return once, today
    return once, _wall(local_now.date() + timedelta(days=1), clock, zone)


def _day_name(word: str) -> int:
    folded = word.casefold()
    for index, day in enumerate(DAY_NAMES):
        if len(folded) >= 3 and day.startswith(folded):
            return index
    raise WhenError(f"{word!r} is not a day of the week (monday … sunday, or weekday)")


def describe(moment: datetime, now: datetime, zone: ZoneInfo) -> str:
    """`09:00`, `09:00 tomorrow` or `09:00 on 2026-12-01`, then `(Asia/Shanghai, UTC+08:00)`."""
    local, today = moment.astimezone(zone), now.astimezone(zone).date()
    when = local.strftime("%H:%M")
    if local.date() == today + timedelta(days=1):
        when += " tomorrow"
    elif local.date() != today:
        when += f" on {local.date().isoformat()}"
    return f"{when} ({zone_label(zone, moment)})"


def zone_label(zone: ZoneInfo, moment: datetime) -> str:
    """`Asia/Shanghai, UTC+08:00`: the zone's name and its offset at `moment`."""
    offset = moment.astimezone(zone).utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    return f"{zone.key}, UTC{sign}{hours:02d}:{mins:02d}"
