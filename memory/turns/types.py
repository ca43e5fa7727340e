"""The conversation as the core sees it: turns, the durable intake's records, and the
Protocols of the turn path's store (SqlStorage has them); core never sees SQLAlchemy."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from memory.chats.types import InChat
from memory.memories.types import MemoryItem, MemoryStore

Role = Literal["user", "assistant", "tool", "system"]
# message: a normal turn; context: a group message that did not trigger the bot;
# tool_call / tool_result: the tool loop; summary: a compacted stretch of history.
TurnKind = Literal["message", "context", "tool_call", "tool_result", "summary"]


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


# The meta key of a `summary` turn naming the id of the last turn it covers.
SUMMARY_THROUGH = "through_id"


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


# -- durable intake (memory/turns/intake.py) --

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


class Intake(Protocol):
    """The durable intake (memory.turns.intake.IntakeStore)."""

    async def accept(self, draft: IntakeDraft, *, queued: bool = True) -> IntakeEntry | None: ...

    async def get(self, entry_id: int) -> IntakeEntry | None: ...

    async def by_message(
        self, platform: str, chat_id: str, platform_message_id: str
    ) -> IntakeEntry | None: ...

    async def move(
        self,
        entry_id: int,
        state: TurnState,
        *,
        expected: Sequence[TurnState],
        delivery: dict[str, Any] | None = None,
    ) -> bool: ...

    async def note_delivery(self, entry_id: int, delivery: dict[str, Any]) -> bool: ...


class Store(TurnStore, MemoryStore, Protocol):
    """Both halves of storage, the intake, one read of a turn's material, the two
    intake moves that must share a transaction with turns, and a chat lock recovery can
    try without waiting."""

    @property
    def intake(self) -> Intake: ...

    async def turn_material(
        self, platform: str, chat_id: str, sender_id: str, limit: int, before_id: int | None
    ) -> TurnMaterial: ...

    async def turn_content(self, turn_id: int) -> Turn | None: ...

    async def claim(self, entry_id: int) -> bool:
        """Count one more attempt at a pending message; False when it is not pending."""

    async def settle(
        self,
        entry_id: int,
        turns: list[NewTurn],
        state: TurnState,
        *,
        merged: Sequence[int] = (),
    ) -> bool:
        """Store `turns` and move the row out of `pending` in one transaction; False (and
        nothing stored) when it was no longer pending. `merged`: a burst's earlier rows,
        settled in the same transaction by the same reply (their user turns first)."""

    def try_chat_lock(self, platform: str, chat_id: str) -> AbstractAsyncContextManager[bool]: ...
