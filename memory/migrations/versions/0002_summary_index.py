"""Partial index for a chat's newest summary turn.

Why: every turn looks up its chat's latest `summary` (compaction); without an index that
lookup walks the chat's whole history backwards when the chat has no summary yet.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ONLY_SUMMARIES = sa.text("kind = 'summary'")


def upgrade() -> None:
    op.create_index(
        "ix_turns_summaries",
        "turns",
        ["chat_id", "id"],
        sqlite_where=ONLY_SUMMARIES,
        postgresql_where=ONLY_SUMMARIES,
    )


def downgrade() -> None:
    op.drop_index("ix_turns_summaries", table_name="turns")
