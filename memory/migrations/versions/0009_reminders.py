"""Reminders and scheduled tasks, their occurrences, and each chat's time zone.

Why two tables: `reminders` says what should happen and when next; `reminder_runs` holds
one row per occurrence, unique on (reminder, due time), so an occurrence is claimed
once however many replicas look at it, and a missed or late one stays visible.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import BIG_ID

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_settings", sa.Column("timezone", sa.String(64), nullable=True))
    op.create_table(
        "reminders",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("chat_type", sa.String(16), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("owner_id", sa.String(128), nullable=False),
        sa.Column("owner_name", sa.String(256), nullable=False),
        sa.Column("origin_message_id", sa.String(128), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("rule", sa.String(256), nullable=False),
        sa.Column("zone", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("next_due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_outcome", sa.String(16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_reminders"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_reminders_due", "reminders", ["state", "next_due_at"])
    op.create_index("ix_reminders_chat", "reminders", ["platform", "chat_id", "id"])
    op.create_table(
        "reminder_runs",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("reminder_id", BIG_ID, nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.String(64), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["reminder_id"],
            ["reminders.id"],
            name="fk_reminder_runs_reminder_id_reminders",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_reminder_runs"),
        sa.UniqueConstraint("reminder_id", "due_at", name="uq_reminder_runs_reminder_id_due_at"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_reminder_runs_state", "reminder_runs", ["state", "id"])


def downgrade() -> None:
    op.drop_index("ix_reminder_runs_state", table_name="reminder_runs")
    op.drop_table("reminder_runs")
    op.drop_index("ix_reminders_chat", table_name="reminders")
    op.drop_index("ix_reminders_due", table_name="reminders")
    op.drop_table("reminders")
    with op.batch_alter_table("chat_settings") as batch:
        batch.drop_column("timezone")
