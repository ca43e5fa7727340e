"""The memory half of the store: rows of the `memories` table, one user's at a time.

A memory hangs off its user's `users` row, created on first sight (an admin may add a
memory before the person ever talks). The unique (user, content hash) key makes the same
memory impossible to store twice, even from two processes at once. How long a memory may
be and how many one person may have are memory.memories.service's rules, not the rows'.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Insert, ScalarSelect, Select, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from memory.chats.ids import RowIds
from memory.chats.models import User
from memory.db.migrate import Database
from memory.db.rows import AUTHOR_LEN, check_key, clean_text, utc
from memory.memories.models import MemoryRow
from memory.memories.service import normalise_memory
from memory.memories.types import MemoryItem, NewMemory


def user_pk_query(platform: str, user_id: str) -> ScalarSelect[int]:
    """users.id of (platform, user id) inside a statement (no row: matches nothing)."""
    return (
        select(User.id)
        .where(User.platform == platform, User.platform_user_id == user_id)
        .scalar_subquery()
    )


def _newest_memories() -> Select[int, str, str, datetime]:
    """One user's memories, newest first (time, then id, breaks ties), for the bound
    parameters `mem_platform` and `mem_user`."""
    user_pk = (
        select(User.id)
        .where(
            User.platform == bindparam("mem_platform"),
            User.platform_user_id == bindparam("mem_user"),
        )
        .scalar_subquery()
    )
    return (
        select(MemoryRow.id, MemoryRow.content, MemoryRow.author, MemoryRow.created_at)
        .where(MemoryRow.user_id == user_pk)
        .order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc())
    )


# Built once: the turn path reads the sender's memories on every message, and building
# the statement each time cost more than running it.
NEWEST_MEMORIES = _newest_memories()


def memories_params(platform: str, user_id: str) -> dict[str, str]:
    """The parameters of NEWEST_MEMORIES for one user."""
    return {"mem_platform": platform, "mem_user": user_id}


def memory_items(platform: str, user_id: str, rows: Iterable[Any]) -> list[MemoryItem]:
    return [MemoryItem(r.id, platform, user_id, r.content, r.author, r.created_at) for r in rows]


class MemoryRows:
    """MemoryStore over a `Database`, sharing user row ids with the turn half."""

    def __init__(self, database: Database, ids: RowIds) -> None:
        self._db = database
        self._ids = ids
        insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert
        self._insert: Insert = (
            insert(MemoryRow)
            .on_conflict_do_nothing(index_elements=["user_id", "content_hash"])
            .returning(MemoryRow.id)
        )

    async def _add(
        self, platform: str, user_id: str, rows: Sequence[tuple[str, str, datetime]]
    ) -> list[MemoryItem]:
        key = (platform, user_id)
        ids = self._ids.known([key], [])

        def write(conn: Connection) -> list[MemoryItem]:
            user_pk = self._ids.user_pk(conn, ids, key, None)
            added: list[MemoryItem] = []
            for content, author, created in rows:
                values = {
                    "user_id": user_pk,
                    "content": content,
                    "content_hash": memory_hash(content),
                    "author": author,
                    "created_at": created,
                }
                pk = conn.execute(self._insert, values).scalar_one_or_none()
                if pk is not None:
                    added.append(MemoryItem(int(pk), platform, user_id, content, author, created))
            return added

        added = await self._db.write(write)
        self._ids.learn(ids)
        return added

    async def add_memory(
        self, platform: str, user_id: str, content: str, author: str
    ) -> MemoryItem | None:
        """Add one memory (stripped); None if the same memory is already stored."""
        check_key("memory user", platform, user_id)
        row = (memory_text(content), memory_author(author), utc(None))
        added = await self._add(platform, user_id, [row])
        return added[0] if added else None

    async def add_memories(
        self, platform: str, user_id: str, memories: Sequence[NewMemory]
    ) -> list[MemoryItem]:
        """Add memories in one transaction (all checked first); returns the new ones."""
        check_key("memory user", platform, user_id)
        rows = [
            (
                memory_text(memory.content, f"memory {number}"),
                memory_author(memory.author, f"memory {number}"),
                utc(memory.created_at),
            )
            for number, memory in enumerate(memories, start=1)
        ]
        return await self._add(platform, user_id, rows) if rows else []

    async def list_memories(self, platform: str, user_id: str) -> list[MemoryItem]:
        """Newest first."""
        params = memories_params(platform, user_id)
        rows = await self._db.read(lambda conn: conn.execute(NEWEST_MEMORIES, params).all())
        return memory_items(platform, user_id, rows)

    async def delete_memory(self, platform: str, user_id: str, memory_id: int) -> bool:
        """Delete one memory, only if it belongs to this user."""
        statement = delete(MemoryRow).where(
            MemoryRow.id == memory_id, MemoryRow.user_id == user_pk_query(platform, user_id)
        )
        return await self._db.write(lambda conn: bool(conn.execute(statement).rowcount))

    async def clear_memories(self, platform: str, user_id: str) -> int:
        statement = delete(MemoryRow).where(MemoryRow.user_id == user_pk_query(platform, user_id))
        return await self._db.write(lambda conn: int(conn.execute(statement).rowcount))


def memory_hash(content: str) -> str:
    """The unique key of a memory row: the same memory (memory.memories.service) hashes the same."""
    return hashlib.sha256(normalise_memory(content).encode()).hexdigest()


def memory_text(content: object, where: str = "memory") -> str:
    """A memory's stored text: stripped and non-empty (its limits are memory.memories.service's)."""
    if not isinstance(content, str):
        raise ValueError(f"{where}: content must be text")
    cleaned = clean_text(content.strip())
    if not cleaned:
        raise ValueError(f"{where}: content is empty")
    return cleaned


def memory_author(author: object, where: str = "memory") -> str:
    if not isinstance(author, str) or not author.strip() or len(author.strip()) > AUTHOR_LEN:
        raise ValueError(f"{where}: author must be 1..{AUTHOR_LEN} characters")
    return clean_text(author.strip())
