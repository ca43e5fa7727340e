"""What the group missed: where each chat's last digest stopped, the feeds a chat follows,
and every entry of a feed once (unique per feed), so a restart never posts one again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    op.create_table(
        "digest_marks",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("through_at", when, nullable=False),
        sa.Column("updated_at", when, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_digest_marks"),
        sa.UniqueConstraint("platform", "chat_id", name="uq_digest_marks_platform_chat_id"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "feeds",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("chat_type", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("added_by", sa.String(200), nullable=False),
        sa.Column("etag", sa.Text(), nullable=True),
        sa.Column("last_modified", sa.Text(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("failure_told", sa.Boolean(), nullable=False),
        sa.Column("next_poll_at", when, nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_feeds"),
        sa.UniqueConstraint("platform", "chat_id", "url", name="uq_feeds_platform_chat_id_url"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_feeds_due", "feeds", ["next_poll_at"])
    op.create_table(
        "feed_entries",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("feed_id", BIG_ID, nullable=False),
        sa.Column("entry_key", sa.String(64), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("link", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.ForeignKeyConstraint(
            ["feed_id"], ["feeds.id"], name="fk_feed_entries_feed_id_feeds", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_feed_entries"),
        sa.UniqueConstraint("feed_id", "entry_key", name="uq_feed_entries_feed_id_entry_key"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_feed_entries_state", "feed_entries", ["feed_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_feed_entries_state", table_name="feed_entries")
    op.drop_table("feed_entries")
    op.drop_index("ix_feeds_due", table_name="feeds")
    op.drop_table("feeds")
    op.drop_table("digest_marks")
