"""Durable intake: every triggered message with its turn state.

Why: a message the bot accepted must be answered exactly once even if the process is
killed at any point; the row is written before any slow step and moves through
pending -> answered -> delivered (or failed / expired).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN = sa.text("state IN ('pending', 'answered')")


def upgrade() -> None:
    op.create_table(
        "intake",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("chat_type", sa.String(16), nullable=False),
        sa.Column("sender_id", sa.String(128), nullable=False),
        sa.Column("sender_name", sa.String(256), nullable=False),
        sa.Column("platform_message_id", sa.String(128), nullable=True),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("user_turn_id", sa.BigInteger(), nullable=True),
        sa.Column("reply_turn_id", sa.BigInteger(), nullable=True),
        sa.Column("delivery", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_intake"),
        sa.UniqueConstraint(
            "platform",
            "chat_id",
            "platform_message_id",
            name="uq_intake_platform_chat_id_platform_message_id",
        ),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_intake_open", "intake", ["state", "id"], sqlite_where=OPEN, postgresql_where=OPEN
    )


def downgrade() -> None:
    op.drop_index("ix_intake_open", table_name="intake")
    op.drop_table("intake")
