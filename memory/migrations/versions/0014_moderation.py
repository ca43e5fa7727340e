"""Moderation: each group's rules, the action log (recorded before an action is taken,
unique per chat and key, so never taken twice), when members joined, and proposals.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _chat() -> list[sa.Column]:
    return [
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
    ]


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    op.create_table(
        "mod_rules",
        *_chat(),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("updated_at", when, nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mod_rules"),
        sa.UniqueConstraint("platform", "chat_id", name="uq_mod_rules_platform_chat_id"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "mod_actions",
        *_chat(),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("user_name", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.Column("finished_at", when, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_mod_actions"),
        sa.UniqueConstraint(
            "platform", "chat_id", "key", name="uq_mod_actions_platform_chat_id_key"
        ),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_mod_actions_chat", "mod_actions", ["platform", "chat_id", "id"])
    op.create_table(
        "mod_members",
        *_chat(),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("joined_at", when, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mod_members"),
        sa.UniqueConstraint(
            "platform", "chat_id", "user_id", name="uq_mod_members_platform_chat_id_user_id"
        ),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "mod_proposals",
        *_chat(),
        sa.Column("reporter_id", sa.String(128), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("user_name", sa.String(256), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("seconds", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("created_at", when, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mod_proposals"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_mod_proposals_chat", "mod_proposals", ["platform", "chat_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_mod_proposals_chat", table_name="mod_proposals")
    op.drop_table("mod_proposals")
    op.drop_table("mod_members")
    op.drop_index("ix_mod_actions_chat", table_name="mod_actions")
    op.drop_table("mod_actions")
    op.drop_table("mod_rules")
