"""Initial schema: users, chats, turns, memories.

Revision ID: 0001
Revises:
Create Date: 2025-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID, create_keyed_table

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    create_keyed_table(
        "users",
        "platform_user_id",
        sa.Column("display_name", sa.String(256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    create_keyed_table(
        "chats",
        "platform_chat_id",
        sa.Column("chat_type", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "turns",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("sender_user_id", sa.Integer(), nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("platform_message_id", sa.String(128), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_turns"),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chats.id"], name="fk_turns_chat_id_chats", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["sender_user_id"],
            ["users.id"],
            name="fk_turns_sender_user_id_users",
            ondelete="SET NULL",
        ),
        sa.UniqueConstraint(
            "chat_id", "platform_message_id", name="uq_turns_chat_id_platform_message_id"
        ),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_turns_chat_id_id", "turns", ["chat_id", "id"])
    op.create_table(
        "memories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_memories_user_id_users", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("user_id", "content_hash", name="uq_memories_user_id_content_hash"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("memories")
    op.drop_index("ix_turns_chat_id_id", table_name="turns")
    op.drop_table("turns")
    op.drop_table("chats")
    op.drop_table("users")
