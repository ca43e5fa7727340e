"""Durable jobs: work that outlives a turn, claimed by one process, delivered once.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    op.create_table(
        "jobs",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("chat_type", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("requester_id", sa.String(128), nullable=False),
        sa.Column("requester_name", sa.String(256), nullable=False),
        sa.Column("origin_message_id", sa.String(128), nullable=True),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        sa.Column("lease_until", when, nullable=True),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("cost_tokens", sa.Integer(), nullable=False),
        sa.Column("delivered_at", when, nullable=True),
        sa.Column("created_at", when, nullable=False),
        sa.Column("updated_at", when, nullable=False),
        sa.Column("finished_at", when, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_jobs_claim", "jobs", ["state", "lease_until"])
    op.create_index("ix_jobs_chat", "jobs", ["platform", "chat_id", "id"])
    op.create_index("ix_jobs_requester", "jobs", ["platform", "requester_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_jobs_requester", table_name="jobs")
    op.drop_index("ix_jobs_chat", table_name="jobs")
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_table("jobs")
