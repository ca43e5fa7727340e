"""Chat activity on the chats row: a title, when it was last active, how many turns.

Why: the console lists every chat, busiest first, and must stay fast at 100k chats.
Counting and sorting turns per chat on each page would walk the whole turns table, so the
turn-storing transaction keeps these three columns up to date (one UPDATE by primary key)
and an index on (last_active_at, id) serves keyset pages. Existing chats are filled in
from their turns here.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EPOCH = "1970-01-01 00:00:00"

BACKFILL = """
UPDATE chats SET
  turn_count = (SELECT count(*) FROM turns WHERE turns.chat_id = chats.id),
  last_active_at = COALESCE(
    (SELECT max(turns.created_at) FROM turns WHERE turns.chat_id = chats.id),
    chats.created_at),
  title = CASE WHEN chats.chat_type = 'private' THEN (
    SELECT users.display_name FROM turns JOIN users ON users.id = turns.sender_user_id
    WHERE turns.chat_id = chats.id AND turns.role = 'user'
    ORDER BY turns.id DESC LIMIT 1) END
"""


def upgrade() -> None:
    # Plain ADD COLUMN (no batch copy): on SQLite a copied `chats` would cascade-delete turns.
    op.add_column("chats", sa.Column("title", sa.String(256), nullable=True))
    op.add_column(
        "chats",
        sa.Column(
            "last_active_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=EPOCH,
        ),
    )
    op.add_column(
        "chats", sa.Column("turn_count", sa.Integer(), nullable=False, server_default="0")
    )
    op.execute(BACKFILL)
    op.create_index("ix_chats_last_active", "chats", ["last_active_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_chats_last_active", table_name="chats")
    with op.batch_alter_table("chats") as batch:
        batch.drop_column("turn_count")
        batch.drop_column("last_active_at")
        batch.drop_column("title")
