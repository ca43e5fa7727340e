"""What the bot did lately, for the console's overview: turns per hour, tokens per day,
and the turns that failed.

Why a search by id: `intake` has no index on its times (an index costs every message a
write), but its ids grow with arrival. So the first row of the last 24 hours is found by
a binary search over the primary key (about 30 point reads), and only the rows after it
are counted, never the whole table. Arrival times out of id order by a few seconds (a
message accepted late) move a row across an hour boundary at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select

from memory.db.migrate import Database
from memory.db.rows import utc
from memory.turns.models import IntakeRow
from memory.usage.models import UsageRow


@dataclass(frozen=True)
class HourCount:
    hour: datetime  # the start of the hour, UTC
    answered: int  # delivered or answered
    failed: int  # failed or expired
    open: int  # still pending


@dataclass(frozen=True)
class DayTokens:
    day: date
    prompt: int
    completion: int
    cached: int = 0  # of `prompt`, served from the provider's prompt cache


@dataclass(frozen=True)
class FailedTurn:
    id: int
    platform: str
    chat_id: str
    sender_name: str
    state: str
    attempts: int
    received_at: datetime


_ANSWERED = {"answered", "delivered"}
_FAILED = {"failed", "expired"}


def first_intake_id_since(conn: Connection, since: datetime) -> int | None:
    """The smallest intake id received at or after `since` (ids grow with arrival)."""
    low, high = conn.execute(select(func.min(IntakeRow.id), func.max(IntakeRow.id))).one()
    if high is None:
        return None

    def time_at(position: int) -> datetime:
        row = conn.execute(
            select(IntakeRow.received_at)
            .where(IntakeRow.id >= position)
            .order_by(IntakeRow.id)
            .limit(1)
        ).one()
        return utc(row[0])

    since = utc(since)
    if time_at(high) < since:
        return None
    while low < high:
        middle = (low + high) // 2
        if time_at(middle) >= since:
            high = middle
        else:
            low = middle + 1
    return int(low)


def hour_of(moment: datetime) -> datetime:
    return utc(moment).replace(minute=0, second=0, microsecond=0)


class Activity:
    """The overview's numbers, each one read."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def turns_per_hour(self, now: datetime, hours: int = 24) -> list[HourCount]:
        """Accepted messages per hour, oldest hour first, `hours` bars ending with now's."""
        last = hour_of(now)
        first = last - timedelta(hours=hours - 1)

        def read(conn: Connection) -> list[Any]:
            start = first_intake_id_since(conn, first)
            if start is None:
                return []
            query = select(IntakeRow.received_at, IntakeRow.state).where(
                IntakeRow.id >= start, IntakeRow.received_at >= first
            )
            return list(conn.execute(query).all())

        counts = {first + timedelta(hours=n): [0, 0, 0] for n in range(hours)}
        for received, state in await self._db.read(read):
            bucket = counts.get(hour_of(received))
            if bucket is None:
                continue
            bucket[0 if state in _ANSWERED else 1 if state in _FAILED else 2] += 1
        return [HourCount(hour, *numbers) for hour, numbers in counts.items()]

    async def tokens_per_day(self, today: date, days: int = 30) -> list[DayTokens]:
        """Prompt and completion tokens per UTC day, oldest first, `days` days to today."""
        first = today - timedelta(days=days - 1)
        query = (
            select(
                UsageRow.day,
                func.sum(UsageRow.prompt_tokens),
                func.sum(UsageRow.completion_tokens),
                func.sum(UsageRow.cached_tokens),
            )
            .where(UsageRow.day >= first, UsageRow.day <= today)
            .group_by(UsageRow.day)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        found = {day: (int(p or 0), int(c or 0), int(h or 0)) for day, p, c, h in rows}
        span = (first + timedelta(days=n) for n in range(days))
        return [DayTokens(day, *found.get(day, (0, 0, 0))) for day in span]

    async def failed_since(self, since: datetime, limit: int = 50) -> list[FailedTurn]:
        """Turns that failed or expired, received since `since`, newest first."""

        def read(conn: Connection) -> list[Any]:
            start = first_intake_id_since(conn, since)
            if start is None:
                return []
            query = (
                select(
                    IntakeRow.id,
                    IntakeRow.platform,
                    IntakeRow.chat_id,
                    IntakeRow.sender_name,
                    IntakeRow.state,
                    IntakeRow.attempts,
                    IntakeRow.received_at,
                )
                .where(IntakeRow.id >= start, IntakeRow.state.in_(sorted(_FAILED)))
                .order_by(IntakeRow.id.desc())
                .limit(limit)
            )
            return list(conn.execute(query).all())

        return [FailedTurn(*row) for row in await self._db.read(read)]
