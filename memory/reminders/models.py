"""The tables of reminders and scheduled tasks and their occurrences (migration 0009)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from memory.chats.models import WorkOriginColumns
from memory.db.base import Base, BigIdKey, owned_by
from memory.db.rows import AUTHOR_LEN, ID_LEN, KIND_LEN, NAME_LEN, UTCDateTime, utcnow

REMINDER_KINDS = ("remind", "task")
REMINDER_STATES = ("active", "done", "missed", "cancelled")
RUN_STATES = ("claimed", "delivered", "late", "missed", "failed", "skipped")


class ReminderRow(WorkOriginColumns, BigIdKey, Base):
    """A reminder (`/remind`) or a scheduled model turn (`/schedule`) of one person in
    one chat. `next_due_at` is the occurrence still to come (None once finished); the
    claim of an occurrence is the conditional UPDATE that moves it on (memory/reminders/store.py).
    """

    __tablename__ = "reminders"
    __table_args__ = (
        Index("ix_reminders_due", "state", "next_due_at"),
        Index("ix_reminders_chat", "platform", "chat_id", "id"),
        {"sqlite_autoincrement": True},
    )

    owner_id: Mapped[str] = mapped_column(String(ID_LEN))
    owner_name: Mapped[str] = mapped_column(String(NAME_LEN))
    text: Mapped[str] = mapped_column(Text)
    rule: Mapped[str] = mapped_column(String(NAME_LEN))
    zone: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    next_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_outcome: Mapped[str | None] = mapped_column(String(KIND_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")


class ReminderRunRow(BigIdKey, Base):
    """One occurrence of a reminder: claimed once (the unique key), then delivered, late,
    missed, failed or skipped. A `claimed` row whose claimer died is recovery's to finish."""

    __tablename__ = "reminder_runs"
    __table_args__ = (
        UniqueConstraint("reminder_id", "due_at"),
        Index("ix_reminder_runs_state", "state", "id"),
        {"sqlite_autoincrement": True},
    )

    reminder_id: Mapped[int] = owned_by("reminders.id")
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str] = mapped_column(String(64))
    claimed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    detail: Mapped[str] = mapped_column(Text, default="")
