"""Token usage per (day, platform, chat, user, model, purpose).

Why: operators must see who spends what, and quotas are checked before every model
call from these counters, shared by replicas.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "usage",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("estimated_calls", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_usage"),
        sa.UniqueConstraint(
            "day",
            "platform",
            "chat_id",
            "user_id",
            "model",
            "purpose",
            name="uq_usage_day_platform_chat_id_user_id_model_purpose",
        ),
    )
    op.create_index("ix_usage_user_day", "usage", ["platform", "user_id", "day"])
    op.create_index("ix_usage_chat_day", "usage", ["platform", "chat_id", "day"])


def downgrade() -> None:
    op.drop_index("ix_usage_chat_day", table_name="usage")
    op.drop_index("ix_usage_user_day", table_name="usage")
    op.drop_table("usage")
