"""Long-term memory as the core sees it: its records and the MemoryStore Protocol (no
SQLAlchemy)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class MemoryItem:
    id: int
    platform: str
    user_id: str
    content: str
    author: str  # "platform:id" of whoever wrote it (the user, an admin, or "model")
    created_at: datetime


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be stored; an import keeps the author and time it was exported with."""

    content: str
    author: str  # "platform:id" of whoever wrote it, "model", "cli" or "import"
    created_at: datetime | None = None  # None: now


class MemoryStore(Protocol):
    """Rows of long-term memory; the rules about them live in
    memory.memories.service.MemoryService."""

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
