"""The declarative base every domain's models stand on, and the 64-bit key they share.

The migrations under memory/migrations are the source of the schema; each domain's
models (memory/<domain>/models.py) describe the same tables so queries are typed and
autogenerate can diff against them. memory/schema.py gathers them all, and
tests/memory/test_storage.py checks that models and migrations agree.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, MetaData
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedColumn, mapped_column

from memory.db.rows import BigId

# Stable constraint names, so later migrations (and SQLite batch mode) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class BigIdKey:
    """`id`, a 64-bit primary key: BIGINT on PostgreSQL, and on SQLite the INTEGER that
    is the rowid (memory.db.rows.BigId): the key of every table whose rows keep coming
    (turns, accepted messages, usage, tool calls, reminders, jobs, knowledge)."""

    id: Mapped[int] = mapped_column(BigId, primary_key=True)


def owned_by(key: str, **options: Any) -> MappedColumn[Any]:
    """A column holding a BigIdKey row's id (`key` is "table.id"): the same 64-bit type, and
    the row goes with its owner (ON DELETE CASCADE)."""
    return mapped_column(BigId, ForeignKey(key, ondelete="CASCADE"), **options)
