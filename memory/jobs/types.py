"""Durable jobs as the core sees them: plain dataclasses, no SQLAlchemy.

Why apart from memory/jobs/store.py: the core's runner (core/jobs/) reads these types, and
importing the core must not load a storage implementation (the store is a seam).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.chats.types import WorkOrigin, person_key
from memory.db.rows import OverLimit

# queued -> running -> done | failed | cancelled; a running job whose lease ran out (its
# process died) is claimed again, up to max_attempts.
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")


class JobRefused(OverLimit):
    """A job that was not stored: its requester already has `pending` jobs queued or
    running (core/jobs/asking.py words it)."""

    def __init__(self, pending: int, limit: int) -> None:
        super().__init__(f"requester has {pending} jobs queued or running", limit)
        self.pending = pending


@dataclass(frozen=True)
class JobDraft(WorkOrigin):
    """What a job is asked to do, by whom, and where its result goes."""

    requester_id: str
    requester_name: str
    args: dict[str, Any] = field(default_factory=dict)
    max_attempts: int = 3


@dataclass(frozen=True)
class JobAsker:
    """Who asks for a job and where its line goes: the chat, the person, and by name the
    message that asked and its thread. Why one type: `/draw`, the draw tool and `/kb add`
    all turn an asker into a job the same way (`draft`)."""

    platform: str
    chat_id: str
    chat_type: str  # "private" | "group" (core.jobs.runner.NO_CHAT: no chat is told)
    user_id: str
    name: str
    message_id: str | None = None
    thread_id: str | None = None

    @property
    def sender_key(self) -> str:
        return person_key(self.platform, self.user_id)

    def draft(self, kind: str, args: dict[str, Any]) -> JobDraft:
        """The job `kind` with `args`, asked by this person in this chat."""
        return JobDraft(
            kind,
            self.platform,
            self.chat_id,
            self.chat_type,
            self.user_id,
            self.name,
            args=args,
            thread_id=self.thread_id,
            origin_message_id=self.message_id,
        )


@dataclass(frozen=True)
class Job(WorkOrigin):
    id: int
    requester_id: str
    requester_name: str
    args: dict[str, Any]
    state: str
    attempts: int
    max_attempts: int
    claimed_by: str | None
    lease_until: datetime | None
    progress: dict[str, Any]
    outcome: str | None  # the one line or answer the chat is sent when the job ends
    result: dict[str, Any]
    cost_tokens: int
    delivered_at: datetime | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def requester_key(self) -> str:
        return person_key(self.platform, self.requester_id)
