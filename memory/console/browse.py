"""Read models for the operator's console: chats and people, a page at a time.

Why keyset pages: an OFFSET page walks every row before it; a keyset page ("the 50 after
this one") is one index range, however deep the operator pages. Chats come busiest first
from `ix_chats_last_active` (the columns the turn-storing transaction keeps); people
newest first by id. A cursor is an opaque string for a URL: a bad one gives the first
page, never an error.

Only reads live here; every change goes through the services the chat commands use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Connection, Select, func, or_, select, tuple_

from memory.chats.models import Chat, User
from memory.db.migrate import Database
from memory.db.rows import utc
from memory.memories.models import MemoryRow
from memory.usage.models import UsageRow

MAX_PAGE = 200
T = TypeVar("T")
AnySelect = Select[*tuple[Any, ...]]


@dataclass(frozen=True)
class ChatRow:
    platform: str
    chat_id: str
    chat_type: str
    title: str | None  # a group's name, or the person's in a private chat
    last_active_at: datetime
    turns: int
    tokens: int  # prompt + completion tokens spent in this chat (the `usage` table)


@dataclass(frozen=True)
class PersonRow:
    platform: str
    user_id: str
    name: str | None
    first_seen: datetime
    memories: int


@dataclass(frozen=True)
class Page(Generic[T]):
    rows: list[T]
    next: str | None  # the cursor of the following page; None on the last one


def like_pattern(text: str) -> str:
    """`%text%` with LIKE's own wildcards escaped (`\\` is the escape character)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _matches(dialect: str, search: str, *columns: Any) -> ColumnElement[bool]:
    """Any column contains `search`, ignoring case. SQLite's own LIKE already ignores ASCII
    case (ilike's lower() on both sides doubles the cost of a search that reads every row);
    PostgreSQL needs ILIKE."""
    pattern = like_pattern(search.strip())
    if dialect == "sqlite":
        return or_(*(column.like(pattern, escape="\\") for column in columns))
    return or_(*(column.ilike(pattern, escape="\\") for column in columns))


def _chat_cursor(row: Any) -> str:
    return f"{utc(row.last_active_at).isoformat()}~{row.id}"


def _parse_chat_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    if not cursor:
        return None
    when, sep, pk = cursor.rpartition("~")
    try:
        return utc(datetime.fromisoformat(when)), int(pk)
    except ValueError:
        return None


def _parse_id_cursor(cursor: str | None) -> int | None:
    try:
        return int(cursor) if cursor else None
    except ValueError:
        return None


def _limit(limit: int) -> int:
    return max(1, min(MAX_PAGE, limit))


class Browse:
    """Chats and people for the console, each page one read."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def chats(
        self, *, limit: int = 50, after: str | None = None, search: str = ""
    ) -> Page[ChatRow]:
        """Chats, most recently active first; `search` matches title or chat id."""
        limit = _limit(limit)
        query = self._chat_select().order_by(Chat.last_active_at.desc(), Chat.id.desc())
        if (key := _parse_chat_cursor(after)) is not None:
            query = query.where(tuple_(Chat.last_active_at, Chat.id) < tuple_(*key))
        if search.strip():
            found = _matches(self._db.dialect, search, Chat.title, Chat.platform_chat_id)
            query = query.where(found)
        rows = await self._db.read(lambda conn: self._chat_rows(conn, query.limit(limit + 1)))
        more = len(rows) > limit
        shown = rows[:limit]
        return Page([row for row, _ in shown], _chat_cursor(shown[-1][1]) if more else None)

    async def chat(self, platform: str, chat_id: str) -> ChatRow | None:
        query = self._chat_select().where(
            Chat.platform == platform, Chat.platform_chat_id == chat_id
        )
        rows = await self._db.read(lambda conn: self._chat_rows(conn, query))
        return rows[0][0] if rows else None

    async def people(
        self, *, limit: int = 50, after: str | None = None, search: str = ""
    ) -> Page[PersonRow]:
        """People newest first; `search` matches name or user id."""
        limit = _limit(limit)
        query = (
            select(
                User.id, User.platform, User.platform_user_id, User.display_name, User.created_at
            )
            .order_by(User.id.desc())
            .limit(limit + 1)
        )
        if (pk := _parse_id_cursor(after)) is not None:
            query = query.where(User.id < pk)
        if search.strip():
            found = _matches(self._db.dialect, search, User.display_name, User.platform_user_id)
            query = query.where(found)
        rows = await self._db.read(lambda conn: self._people_rows(conn, query))
        more = len(rows) > limit
        shown = rows[:limit]
        return Page([row for row, _ in shown], str(shown[-1][1]) if more else None)

    async def person(self, platform: str, user_id: str) -> PersonRow | None:
        query = select(
            User.id, User.platform, User.platform_user_id, User.display_name, User.created_at
        ).where(User.platform == platform, User.platform_user_id == user_id)
        rows = await self._db.read(lambda conn: self._people_rows(conn, query))
        return rows[0][0] if rows else None

    # -- one read each -------------------------------------------------------------------

    @staticmethod
    def _chat_select() -> AnySelect:
        return select(
            Chat.id,
            Chat.platform,
            Chat.platform_chat_id,
            Chat.chat_type,
            Chat.title,
            Chat.last_active_at,
            Chat.turn_count,
        )

    @staticmethod
    def _chat_rows(conn: Connection, query: AnySelect) -> list[tuple[ChatRow, Any]]:
        rows = conn.execute(query).all()
        tokens = _chat_tokens(conn, rows)
        return [
            (
                ChatRow(
                    platform=r.platform,
                    chat_id=r.platform_chat_id,
                    chat_type=r.chat_type,
                    title=r.title,
                    last_active_at=r.last_active_at,
                    turns=r.turn_count,
                    tokens=tokens.get((r.platform, r.platform_chat_id), 0),
                ),
                r,
            )
            for r in rows
        ]

    @staticmethod
    def _people_rows(conn: Connection, query: AnySelect) -> list[tuple[PersonRow, int]]:
        rows = conn.execute(query).all()
        counts: dict[int, int] = {}
        if rows:
            counted = (
                select(MemoryRow.user_id, func.count())
                .where(MemoryRow.user_id.in_([r.id for r in rows]))
                .group_by(MemoryRow.user_id)
            )
            counts = {int(pk): int(n) for pk, n in conn.execute(counted).all()}
        return [
            (
                PersonRow(
                    r.platform,
                    r.platform_user_id,
                    r.display_name,
                    r.created_at,
                    counts.get(r.id, 0),
                ),
                int(r.id),
            )
            for r in rows
        ]


def _chat_tokens(conn: Connection, rows: Sequence[Any]) -> dict[tuple[str, str], int]:
    """Tokens per chat of one page, summed over `ix_usage_chat_day`."""
    if not rows:
        return {}
    query = (
        select(
            UsageRow.platform,
            UsageRow.chat_id,
            func.sum(UsageRow.prompt_tokens + UsageRow.completion_tokens),
        )
        .where(
            UsageRow.platform.in_({r.platform for r in rows}),
            UsageRow.chat_id.in_({r.platform_chat_id for r in rows}),
        )
        .group_by(UsageRow.platform, UsageRow.chat_id)
    )
    return {(p, c): int(total or 0) for p, c, total in conn.execute(query).all()}
