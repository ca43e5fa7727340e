"""The table of durable jobs (migration 0011); memory/schema.py gathers every domain's
tables for Alembic and the schema test."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from memory.chats.models import WorkOriginColumns
from memory.db.base import Base, BigIdKey
from memory.db.rows import ID_LEN, KIND_LEN, NAME_LEN, UTCDateTime, utcnow


class JobRow(WorkOriginColumns, BigIdKey, Base):
    """Work that outlives a turn (a picture drawn, a background task, a document indexed):
    a row first, work second. One process claims it (a conditional UPDATE with a lease);
    a process killed mid-way leaves a lease that runs out, and another claims it again.
    The outcome is stored before it is sent, and `delivered_at` says it went out
    (memory/jobs/store.py, core/jobs/runner.py, migration 0011).
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
