"""Reminder data as the core sees it: plain dataclasses, no SQLAlchemy.

Why apart from memory/reminders.py: the core (core/reminders/) reads these types, and
importing the core must not load a storage implementation (the store is a seam).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory.types import InChat


class ReminderRefused(ValueError):
    """A reminder that is not stored; str() is one line safe to show the person."""


@dataclass(frozen=True)
class ReminderDraft:
    kind: str  # "remind" or "task"
    platform: str
    chat_id: str
    chat_type: str
    owner_id: str
    owner_name: str
    text: str
    rule: str
    zone: str
    first_due: datetime
    thread_id: str | None = None
    origin_message_id: str | None = None


@dataclass(frozen=True)
class Reminder(InChat):
    id: int
    kind: str
    platform: str
    chat_id: str
    chat_type: str
    thread_id: str | None
    owner_id: str
    owner_name: str
    origin_message_id: str | None
    text: str
    rule: str
    zone: str
    state: str
    next_due_at: datetime | None
    last_due_at: datetime | None
    last_outcome: str | None
    created_at: datetime
    updated_at: datetime
    updated_by: str

    @property
    def owner_key(self) -> str:
        return f"{self.platform}:{self.owner_id}"


@dataclass(frozen=True)
class Run:
    """One claimed occurrence."""

    id: int
    reminder_id: int
    due_at: datetime
    state: str
    skipped: int
    claimed_by: str
    claimed_at: datetime
