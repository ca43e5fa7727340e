"""Reminder data as the core sees it: plain dataclasses, no SQLAlchemy.

Why apart from memory/reminders/store.py: the core (core/reminders/) reads these types, and
importing the core must not load a storage implementation (the store is a seam).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memory.chats.types import WorkOrigin, person_key
from memory.db.rows import OverLimit


class ReminderRefused(ValueError):
    """A reminder the core would not set; str() is one line safe to show the person."""


class ReminderOverLimit(OverLimit):
    """A reminder the store did not write: over the limit `what` names (the text's length,
    one person's or one chat's active reminders; core/reminders/service.py words it)."""

    def __init__(self, what: Literal["text", "person", "chat"], limit: int) -> None:
        super().__init__(f"reminder over the {what} limit", limit)
        self.what = what


@dataclass(frozen=True)
class ReminderDraft(WorkOrigin):
    """A reminder (kind "remind") or a scheduled task ("task") about to be stored."""

    owner_id: str
    owner_name: str
    text: str
    rule: str
    zone: str
    first_due: datetime


@dataclass(frozen=True)
class Reminder(WorkOrigin):
    id: int
    owner_id: str
    owner_name: str
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
        return person_key(self.platform, self.owner_id)


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
