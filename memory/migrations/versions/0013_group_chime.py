"""A group's own chime-in level (`/bot chime off|low|normal`).

Why a column of its own: like the time zone (0009), it is one per-chat setting an admin
changes from the chat and every replica must see; NULL means `[groups] chime_in` decides.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_settings", sa.Column("chime", sa.String(8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chat_settings") as batch:
        batch.drop_column("chime")
