"""What the turn path asks of storage: interfaces only (memory.store.SqlStorage has them)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import date
from typing import Any, Protocol

from memory.types import (
    DaySpend,
    IntakeDraft,
    IntakeEntry,
    MemoryStore,
    NewTurn,
    Turn,
    TurnMaterial,
    TurnState,
    TurnStore,
    UsageDelta,
)


class Intake(Protocol):
    """The durable intake (memory.intake.IntakeStore)."""

    async def accept(self, draft: IntakeDraft) -> IntakeEntry | None: ...

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


class UsageSink(Protocol):
    """Where the usage meter adds what model calls cost (memory.usage.UsageStore)."""

    async def add(self, deltas: Sequence[UsageDelta]) -> None: ...


class SpendReader(Protocol):
    """One day's spend of a user, a chat and everyone, for the quotas
    (memory.usage.UsageStore)."""

    async def spent_on(
        self, day: date, platform: str, chat_id: str, user_id: str, *, everyone: bool = True
    ) -> DaySpend: ...
