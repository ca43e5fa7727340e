"""What the migrations share: the id type of large tables and the platform-keyed table.

Why frozen: a migration must build the same schema on every run, for ever, so nothing
here may change once a migration uses it (a new shape gets a new helper), and nothing
here reads the models (memory/<domain>/models.py), whose lengths may move on with a
later migration.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

# 64-bit ids for tables that grow without bound; INTEGER on SQLite, where only an
# INTEGER PRIMARY KEY is the rowid (and so autoincrements).
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def create_keyed_table(name: str, key: str, *columns: sa.Column[Any]) -> None:
    """A table of one row per (platform, `key`) under a small integer id, as users,
    chats and chat settings are; `columns` stand between the key and the constraints."""
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column(key, sa.String(128), nullable=False),
        *columns,
        sa.PrimaryKeyConstraint("id", name=f"pk_{name}"),
        sa.UniqueConstraint("platform", key, name=f"uq_{name}_platform_{key}"),
    )
