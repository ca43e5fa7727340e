"""Tool calls from MCP servers: one row per call (server, tool, sender, chat, outcome).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("id", BIG_ID, primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(256), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
    )
    op.create_index("ix_tool_calls_created", "tool_calls", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_tool_calls_created", table_name="tool_calls")
    op.drop_table("tool_calls")
