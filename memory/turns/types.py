"""What storage holds and the interfaces core depends on (core never sees SQLAlchemy)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import date, datetime
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant", "tool", "system"]
# message: a normal turn; context: a group message that did not trigger the bot;
# tool_call / tool_result: the tool loop; summary: a compacted stretch of history.
TurnKind = Literal["message", "context", "tool_call", "tool_result", "summary"]


@dataclass(frozen=True, slots=True, order=True)
class ChatKey:
    """Which chat: a platform and that platform's chat id, the one spelling everywhere.

    Written `platform:chat_id` in logs, config (`[access] allowed_groups`), commands and
    the CLI; `parse` reads that back. The chat id may itself hold colons (`qq`,
    `group:123`): only the first one separates.
    """

    platform: str
    chat_id: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.chat_id}"

    @classmethod
    def parse(cls, text: str) -> ChatKey:
        platform, sep, chat_id = text.strip().partition(":")
        if not sep or not platform or not chat_id:
            raise ValueError(f"{text!r} is not a chat key: write platform:chat_id")
        return cls(platform, chat_id)


def person_key(platform: str, user_id: str) -> str:
    """Which person: `platform:user_id`, the one spelling of a person as ChatKey is of a
    chat (access lists and admins, memory and quotas, a reminder's owner, a job's asker)."""
    return f"{platform}:{user_id}"


class InChat:
    """A record that belongs to one chat: its `platform` and `chat_id` name it."""

    platform: str
    chat_id: str

    @property
    def chat_key(self) -> ChatKey:
        return ChatKey(self.platform, self.chat_id)


@dataclass(frozen=True)
class WorkOrigin(InChat):
    """Work that outlives a turn (a reminder, a job) and where it was asked for: its kind,
    the chat, and, by name only, the thread and the message that asked (in a group the
    answer quotes it). Drafts and stored records of every kind share these fields."""

    kind: str
    platform: str
    chat_id: str
    chat_type: str  # "private" | "group"
    _: KW_ONLY
    thread_id: str | None = None
    origin_message_id: str | None = None

    def origin_columns(self) -> dict[str, Any]:
        """These fields by name: a store writes them to the row's columns of those names."""
        return {f.name: getattr(self, f.name) for f in fields(WorkOrigin)}


@dataclass(frozen=True)
class NewTurn:
    """A turn about to be stored. Chat and sender rows are created on first sight."""

    platform: str
    chat_id: str
    chat_type: str  # "private" | "group"
    role: Role
    kind: TurnKind
    content: str
    token_count: int
    sender_id: str | None = None
    sender_name: str | None = None
    platform_message_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    chat_title: str | None = None  # a group's name, where the platform says it


@dataclass(frozen=True)
class Turn:
    id: int
    platform: str
    chat_id: str
    role: Role
    kind: TurnKind
    content: str
    token_count: int
    sender_id: str | None
    sender_name: str | None
    platform_message_id: str | None
    meta: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class MemoryItem:
    id: int
    platform: str
    user_id: str
    content: str
    author: str  # "platform:id" of whoever wrote it (the user, an admin, or "model")
    created_at: datetime


# The meta key of a `summary` turn naming the id of the last turn it covers.
SUMMARY_THROUGH = "through_id"


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be stored; an import keeps the author and time it was exported with."""

    content: str
    author: str  # "platform:id" of whoever wrote it, "model", "cli" or "import"
    created_at: datetime | None = None  # None: now


@dataclass(frozen=True)
class TurnMaterial:
    """What one turn's context is built from, read together.

    `history` holds only the turns after `summary` (those it covers, and summary turns
    themselves, are left out by the read), so nobody downstream filters it again.
    """

    history: list[Turn]  # the chat's recent turns after its summary, oldest first
    summary: Turn | None  # the chat's latest summary turn
    memories: list[MemoryItem]  # the sender's, newest first
    summary_through: int = 0  # the id of the last turn `summary` covers (0: no summary)


class TurnStore(Protocol):
    async def add_turn(self, turn: NewTurn) -> Turn | None:
        """Store a turn; None when (chat, platform_message_id) was stored before."""

    async def add_turns(self, turns: list[NewTurn]) -> list[Turn]:
        """Store several turns in one transaction (all or nothing)."""

    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]:
        """The newest `limit` turns of one chat (older than `before_id`), oldest first."""

    async def clear_history(self, platform: str, chat_id: str) -> int:
        """Delete one chat's turns; returns how many."""

    def chat_lock(self, platform: str, chat_id: str) -> AbstractAsyncContextManager[object]:
        """Hold one chat's turn order across daemon replicas (a no-op on SQLite)."""


class MemoryStore(Protocol):
    """Rows of long-term memory; the rules about them live in memory.service.MemoryService."""

    async def add_memory(
        self, platform: str, user_id: str, content: str, author: str
    ) -> MemoryItem | None:
        """Add one memory; None when the same text is already stored for that user."""

    async def add_memories(
        self, platform: str, user_id: str, memories: Sequence[NewMemory]
    ) -> list[MemoryItem]:
        """Add several in one transaction (all or nothing); returns the ones not stored before."""

    async def list_memories(self, platform: str, user_id: str) -> list[MemoryItem]:
        """Newest first."""

    async def delete_memory(self, platform: str, user_id: str, memory_id: int) -> bool: ...

    async def clear_memories(self, platform: str, user_id: str) -> int: ...


# -- durable intake (memory/intake.py) --

TurnState = Literal["pending", "answered", "delivered", "failed", "expired"]


@dataclass(frozen=True)
class IntakeMessage:
    """What every intake record holds of the triggered message: where, who, what."""

    platform: str
    chat_id: str
    chat_type: str
    sender_id: str
    sender_name: str
    text: str


@dataclass(frozen=True)
class IntakeDraft(IntakeMessage):
    """A triggered message as accepted: enough to answer it again after a crash."""

    platform_message_id: str | None = None
    thread_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)  # image refs, mention flags
    received_at: datetime | None = None


@dataclass(frozen=True)
class IntakeEntry(IntakeMessage, InChat):
    """A stored intake row: the message and how far its answer got."""

    platform_message_id: str | None
    thread_id: str | None
    payload: dict[str, Any]
    state: TurnState
    attempts: int
    user_turn_id: int | None
    reply_turn_id: int | None
    delivery: dict[str, Any]
    received_at: datetime
    updated_at: datetime
    id: int


@dataclass(frozen=True)
class IntakeStats:
    pending: int
    answered: int
    oldest_pending: datetime | None


# A usage counter row's key (memory/usage.py sums per key and day).
USAGE_KEY = ("day", "platform", "chat_id", "user_id", "model", "purpose")


@dataclass(frozen=True)
class UsageDelta:
    """What some model calls cost, to be added to the day's row of its key."""

    day: date  # UTC
    platform: str
    chat_id: str
    user_id: str
    model: str
    purpose: str  # one of memory.models.USAGE_PURPOSES
    prompt_tokens: int
    completion_tokens: int
    calls: int = 1
    estimated_calls: int = 0  # of `calls`, how many were counted by us (no API usage)
    cached_tokens: int = 0  # of prompt_tokens, what the provider said it served from cache

    @property
    def key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in USAGE_KEY)


@dataclass(frozen=True)
class DaySpend:
    """One day's tokens of a user, of a chat and of everyone (what quotas compare)."""

    user: int = 0
    chat: int = 0
    everyone: int = 0
