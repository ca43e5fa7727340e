"""Per-chat settings admins change at run time (`/bot on|off|allow|deny|persona|wake`).

Why in the database: they must survive a restart and be shared by replicas.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import create_keyed_table

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    create_keyed_table(
        "chat_settings",
        "chat_id",
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=True),
        sa.Column("persona", sa.Text(), nullable=False),
        sa.Column("wake_words", sa.JSON(), nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("chat_settings")
