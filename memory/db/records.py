"""Reading rows into the plain records the core sees (IntakeEntry, Reminder, Job, ...).

Why one helper: every store selects the columns named like its record's fields, in the
record's order, and builds the record from each row; that is one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, select

from memory.db.migrate import Database

R = TypeVar("R")


class Records(Generic[R]):
    """The columns of `table` that make up `record`, and the reads that build records."""

    def __init__(self, table: type, record: Callable[..., R]) -> None:
        fields = getattr(record, "__dataclass_fields__")  # noqa: B009 (a dataclass type)
        self.columns = tuple(getattr(table, name) for name in fields)
        self._names = tuple(fields)
        self._id = getattr(table, "id")  # noqa: B009 (every record table has one)
        self._record = record

    def select(self) -> Select[Any]:
        return select(*self.columns)

    def of(self, row: Any) -> R:
        """By name: a record's fields may be keyword-only (memory.chats.types.WorkOrigin)."""
        return self._record(**dict(zip(self._names, row, strict=True)))

    async def one(self, database: Database, query: Select[Any]) -> R | None:
        row = await database.read(lambda conn: conn.execute(query).first())
        return self.of(row) if row is not None else None

    async def by_id(self, database: Database, row_id: int) -> R | None:
        """The record of row `row_id` (the table's `id` column), or None."""
        return await self.one(database, self.select().where(self._id == row_id))

    async def written(self, database: Database, row_id: int) -> R:
        """The record of a row this process has just written (so it exists)."""
        found = await self.by_id(database, row_id)
        if found is None:
            raise LookupError(f"row {row_id} vanished right after it was written")
        return found

    async def all(self, database: Database, query: Select[Any]) -> list[R]:
        rows = await database.read(lambda conn: conn.execute(query).all())
        return [self.of(row) for row in rows]
