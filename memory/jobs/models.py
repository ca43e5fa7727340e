"""The tables of work that outlives a turn: reminders and their occurrences, and jobs.

Why apart from memory/models.py: each table family is one job (and the whole module stays
readable); memory/schema.py gathers every family for Alembic and the schema test.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from memory.models import Base, BigIdKey, ChatAddress
from memory.rows import (
    AUTHOR_LEN,
    ID_LEN,
    KIND_LEN,
    NAME_LEN,
    UTCDateTime,
    utcnow,
)

# -- reminders and scheduled tasks (migration 0009) --


class WorkOriginColumns(ChatAddress):
    """The columns of memory.types.WorkOrigin, shared by every table of such work: its
    kind, the chat (ChatAddress), the thread, and the message that asked."""

    kind: Mapped[str] = mapped_column(String(KIND_LEN))
    thread_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    origin_message_id: Mapped[str | None] = mapped_column(String(ID_LEN))


REMINDER_KINDS = ("remind", "task")
REMINDER_STATES = ("active", "done", "missed", "cancelled")
RUN_STATES = ("claimed", "delivered", "late", "missed", "failed", "skipped")


class ReminderRow(WorkOriginColumns, BigIdKey, Base):
    """A reminder (`/remind`) or a scheduled model turn (`/schedule`) of one person in
    one chat. `next_due_at` is the occurrence still to come (None once finished); the
    claim of an occurrence is the conditional UPDATE that moves it on (memory/reminders.py).
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

    reminder_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("reminders.id", ondelete="CASCADE"),
    )
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str] = mapped_column(String(64))
    claimed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    detail: Mapped[str] = mapped_column(Text, default="")


class JobRow(WorkOriginColumns, BigIdKey, Base):
    """Work that outlives a turn (a picture drawn, a background task, a document indexed):
    a row first, work second. One process claims it (a conditional UPDATE with a lease);
    a process killed mid-way leaves a lease that runs out, and another claims it again.
    The outcome is stored before it is sent, and `delivered_at` says it went out
    (memory/jobs.py, core/jobs/runner.py, migration 0011).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_claim", "state", "lease_until"),
        Index("ix_jobs_chat", "platform", "chat_id", "id"),
        Index("ix_jobs_requester", "platform", "requester_id", "state"),
        {"sqlite_autoincrement": True},
    )

    requester_id: Mapped[str] = mapped_column(String(ID_LEN))
    requester_name: Mapped[str] = mapped_column(String(NAME_LEN))
    args: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    outcome: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    cost_tokens: Mapped[int] = mapped_column(Integer, default=0)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
