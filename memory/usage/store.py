"""Token usage: one row per (UTC day, platform, chat, user, model, purpose), added to in place.

Why one row per key and day instead of one per call: `/usage`, the quotas (read before
every model call) and the console's charts become small indexed sums however many
messages there were, and every replica adds to the same counters with a single
`INSERT ... ON CONFLICT DO UPDATE`, so concurrent writers never lose an increment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, case, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from memory.db.migrate import Database
from memory.db.rows import NAME_LEN, check_key
from memory.usage.models import USAGE_PURPOSES, UsageRow
from memory.usage.types import USAGE_KEY as _KEY
from memory.usage.types import DaySpend, GroupBy, UsageDelta, UsageGroup, UsageScope, UsageTotals

_COUNTS = ("prompt_tokens", "completion_tokens", "calls", "estimated_calls", "cached_tokens")


def check_delta(delta: UsageDelta) -> None:
    """Refuse a malformed delta before anything is written, naming what is wrong."""
    check_key("usage chat", delta.platform, delta.chat_id)
    check_key("usage user", delta.platform, delta.user_id)
    if not isinstance(delta.day, date):
        raise ValueError("usage: day must be a date")
    if delta.purpose not in USAGE_PURPOSES:
        raise ValueError(f"usage: purpose must be one of {USAGE_PURPOSES}, not {delta.purpose!r}")
    if not isinstance(delta.model, str) or not delta.model:
        raise ValueError("usage: model must be a non-empty string")
    for name in _COUNTS:
        value = getattr(delta, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"usage: {name} must be a non-negative integer, not {value!r}")


def merge(deltas: Sequence[UsageDelta]) -> list[UsageDelta]:
    """Deltas of the same key summed, in key order (so concurrent writers lock rows in
    the same order and cannot deadlock on PostgreSQL)."""
    merged: dict[tuple[Any, ...], UsageDelta] = {}
    for delta in deltas:
        check_delta(delta)
        delta = replace(delta, model=delta.model[:NAME_LEN])
        found = merged.get(delta.key)
        if found is not None:
            delta = replace(
                found, **{name: getattr(found, name) + getattr(delta, name) for name in _COUNTS}
            )
        merged[delta.key] = delta
    return [merged[key] for key in sorted(merged)]


def _scope(scope: UsageScope) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if (scope.user_id or scope.chat_id) and not scope.platform:
        raise ValueError("usage: a user or chat scope needs its platform")
    if scope.platform is not None:
        where.append(UsageRow.platform == scope.platform)
    if scope.user_id is not None:
        where.append(UsageRow.user_id == scope.user_id)
    if scope.chat_id is not None:
        where.append(UsageRow.chat_id == scope.chat_id)
    if scope.purpose is not None:
        where.append(UsageRow.purpose == scope.purpose)
    return where


_SUMS = (
    func.coalesce(func.sum(UsageRow.prompt_tokens), 0),
    func.coalesce(func.sum(UsageRow.completion_tokens), 0),
    func.coalesce(func.sum(UsageRow.calls), 0),
    func.coalesce(func.sum(UsageRow.estimated_calls), 0),
    func.coalesce(func.sum(UsageRow.cached_tokens), 0),
)
_TOKENS = func.coalesce(func.sum(UsageRow.prompt_tokens + UsageRow.completion_tokens), 0)


def _totals(row: Any) -> UsageTotals:
    return UsageTotals(*(int(value or 0) for value in row))


class UsageStore:
    """The usage table over a `Database`; each method is one transaction or one read."""

    def __init__(self, database: Database) -> None:
        self._db = database
        insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert
        statement = insert(UsageRow)
        self._upsert = statement.on_conflict_do_update(
            index_elements=list(_KEY),
            set_={name: getattr(UsageRow, name) + statement.excluded[name] for name in _COUNTS},
        )

    async def add(self, deltas: Sequence[UsageDelta]) -> None:
        """Add each delta to its day's row (created on first use), in one transaction."""
        rows = [
            {name: getattr(delta, name) for name in (*_KEY, *_COUNTS)} for delta in merge(deltas)
        ]
        if rows:  # distinct keys after merge(): no row is hit twice in one statement
            await self._db.write(lambda conn: conn.execute(self._upsert, rows))

    async def totals(
        self, since: date, until: date, scope: UsageScope | None = None
    ) -> UsageTotals:
        """Sums over the days `since`..`until`, both included."""
        query = select(*_SUMS).where(
            UsageRow.day >= since, UsageRow.day <= until, *_scope(scope or UsageScope())
        )
        row = await self._db.read(lambda conn: conn.execute(query).one())
        return _totals(row)

    async def spent_on(
        self,
        day: date,
        platform: str,
        chat_id: str,
        user_id: str,
        *,
        everyone: bool = True,
    ) -> DaySpend:
        """A user's, a chat's and (when `everyone`) all tokens of one day, in one read.

        Without `everyone` only the rows of this user or this chat are visited (indexed).
        """
        mine = and_(UsageRow.platform == platform, UsageRow.user_id == user_id)
        here = and_(UsageRow.platform == platform, UsageRow.chat_id == chat_id)
        tokens = UsageRow.prompt_tokens + UsageRow.completion_tokens
        query = select(
            func.coalesce(func.sum(case((mine, tokens), else_=0)), 0),
            func.coalesce(func.sum(case((here, tokens), else_=0)), 0),
            func.coalesce(func.sum(tokens), 0),
        ).where(UsageRow.day == day)
        if not everyone:
            query = query.where(or_(mine, here))
        user, chat, total = await self._db.read(lambda conn: conn.execute(query).one())
        return DaySpend(int(user), int(chat), int(total) if everyone else 0)

    async def grouped(
        self,
        by: GroupBy,
        since: date,
        until: date,
        scope: UsageScope | None = None,
        *,
        limit: int | None = None,
    ) -> list[UsageGroup]:
        """Totals per user, chat, model or purpose (most tokens first), or per day (oldest
        first)."""
        columns: tuple[Any, ...] = {
            "user": (UsageRow.platform, UsageRow.user_id),
            "chat": (UsageRow.platform, UsageRow.chat_id),
            "model": (UsageRow.model,),
            "purpose": (UsageRow.purpose,),
            "day": (UsageRow.day,),
        }[by]
        query = (
            select(*columns, *_SUMS)
            .where(UsageRow.day >= since, UsageRow.day <= until, *_scope(scope or UsageScope()))
            .group_by(*columns)
        )
        if by == "day":
            query = query.order_by(UsageRow.day)
        else:
            query = query.order_by(_TOKENS.desc(), *columns)
        if limit is not None:
            query = query.limit(limit)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        width = len(columns)
        return [UsageGroup(_group_key(by, row[:width]), _totals(row[width:])) for row in rows]

    async def series(
        self, until: date, days: int, scope: UsageScope | None = None
    ) -> list[tuple[date, UsageTotals]]:
        """The last `days` days up to `until`, oldest first, every day present (0 if idle)."""
        if days < 1:
            raise ValueError("days must be at least 1")
        since = until - timedelta(days=days - 1)
        found = {
            group.key: group.totals for group in await self.grouped("day", since, until, scope)
        }
        return [
            (day, found.get(day.isoformat(), UsageTotals()))
            for day in (since + timedelta(days=n) for n in range(days))
        ]


def _group_key(by: GroupBy, values: Sequence[Any]) -> str:
    if by in ("user", "chat"):
        return f"{values[0]}:{values[1]}"
    if by == "day":
        day = values[0]
        return day.isoformat() if isinstance(day, date) else str(day)
    return str(values[0])


__all__ = ["UsageStore", "check_delta", "merge"]
