"""What fits in a row, said once: column lengths, the UTC datetime type, and the checks
that refuse bad input with a clear ValueError before anything is written.

Why apart from the models: every store checks its input with these, and every domain's
models read the same lengths; the models (memory/<domain>/models.py) are only the tables.
A domain's own checks (a turn's, a memory's) live in that domain's store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, Connection, DateTime, Integer, Select
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

# Lengths are enforced in Python too (by the stores) so callers get a clear ValueError. How long
# a memory may be is a rule of memory.memories.service, not of the row (content is TEXT).
PLATFORM_LEN = 32
ID_LEN = 128
NAME_LEN = 256
AUTHOR_LEN = 200
KIND_LEN = 16

# SQLite only aliases rowid for INTEGER PRIMARY KEY, so BIGINT must become INTEGER there;
# a column that refers to such a key has the same type.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class OverLimit(ValueError):
    """A write the store refused because it would pass `limit`. Facts only: what a person
    is told is the core's, from the subclass's fields."""

    def __init__(self, fact: str, limit: int) -> None:
        super().__init__(f"{fact} (limit {limit})")
        self.limit = limit


def refuse_over(conn: Connection, counted: Select[Any], refused: OverLimit) -> None:
    """Raise `refused` when `counted`, read inside the write's transaction, has reached
    `refused.limit` already: every store with a quota checks it this one way."""
    if conn.execute(counted).scalar_one() >= refused.limit:
        raise refused


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    PostgreSQL keeps the zone (timestamptz); SQLite stores text without one, so values
    are normalised to UTC on the way in and get UTC attached on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def utc(value: datetime | None) -> datetime:
    """`value` in UTC (naive means UTC already); now when None."""
    if value is None:
        return datetime.now(UTC)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# -- what fits in a row: checked before any write, so a caller gets a clear ValueError --


def clean_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; replace it on every backend so both agree."""
    return value.replace("\x00", "\ufffd")


def check_key(what: str, platform: object, ident: object) -> None:
    if not isinstance(platform, str) or not platform or len(platform) > PLATFORM_LEN:
        raise ValueError(f"{what}: platform must be 1..{PLATFORM_LEN} characters")
    if not isinstance(ident, str) or not ident or len(ident) > ID_LEN:
        raise ValueError(f"{what}: id must be 1..{ID_LEN} characters")
