"""Reading a chat's turns back: the history a turn's context is built from.

This runs on every turn (turn_material is one database round trip for the history, the
summary and the sender's memories), so its statements are built once and its rows
unpacked by position.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Text, bindparam, select, type_coerce

from memory.chats.ids import RowIds
from memory.chats.models import Chat, User
from memory.chats.types import ChatKey
from memory.db.migrate import Database
from memory.memories.store import NEWEST_MEMORIES, memories_params, memory_items
from memory.turns.models import TurnRow
from memory.turns.types import SUMMARY_THROUGH, Turn, TurnMaterial


def _meta(stored: Any) -> dict[str, Any]:
    """A turn's meta as the history read returns it: JSON text on SQLite (mostly "{}",
    decoded here without the JSON type's layers), already a dict on PostgreSQL (asyncpg
    decodes json itself)."""
    if isinstance(stored, str):
        return {} if stored == "{}" else json.loads(stored) or {}
    return stored or {}


# What `_turns` unpacks, in its order: a turn's columns and its sender's.
_TURN_COLUMNS = (
    TurnRow.id,
    TurnRow.role,
    TurnRow.kind,
    TurnRow.content,
    TurnRow.token_count,
    TurnRow.platform_message_id,
    type_coerce(TurnRow.meta, Text()),  # decoded by _meta: most are "{}"
    TurnRow.created_at,
    User.platform_user_id,
    User.display_name,
)


class TurnReads:
    """The read side of the turns table for one `Database`."""

    def __init__(self, database: Database, ids: RowIds) -> None:
        self._db = database
        self._ids = ids
        recent = (
            select(*_TURN_COLUMNS)
            .outerjoin(User, User.id == TurnRow.sender_user_id)
            .where(TurnRow.chat_id == bindparam("chat_pk"))
            .order_by(TurnRow.id.desc())
            .limit(bindparam("limit"))
        )
        self._recent = recent
        self._recent_before = recent.where(TurnRow.id < bindparam("before_id"))
        self._summary = recent.where(TurnRow.kind == "summary")

    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]:
        """The newest `limit` turns of one chat (older than `before_id`), oldest first."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"limit must be a non-negative integer, not {limit!r}")
        chat_pk = await self._ids.find_chat(ChatKey(platform, chat_id)) if limit else None
        if chat_pk is None:
            return []
        params = {"chat_pk": chat_pk, "limit": limit, "before_id": before_id}
        query = self._recent if before_id is None else self._recent_before
        rows = await self._db.read(lambda conn: conn.execute(query, params).all())
        return self._turns(platform, chat_id, reversed(rows))

    async def turn_material(
        self, platform: str, chat_id: str, sender_id: str, limit: int, before_id: int | None
    ) -> TurnMaterial:
        """What one turn's context needs, in one database round trip: the chat's recent
        turns before `before_id` that come after its latest summary, that summary, and
        the sender's memories.

        The summary is looked up on its own only when the history read cannot hold it:
        the newest turns of a chat contain its latest summary, if it has one, unless the
        read was cut at `limit` (or starts before `before_id`) without reaching it.
        """
        chat_pk = await self._ids.find_chat(ChatKey(platform, chat_id))
        memories = memories_params(platform, sender_id)
        recent = {"chat_pk": chat_pk, "limit": limit, "before_id": before_id}
        history = self._recent if before_id is None else self._recent_before

        def read(conn: Connection) -> tuple[list[Turn], Turn | None, Sequence[Any]]:
            if chat_pk is None:
                return [], None, conn.execute(NEWEST_MEMORIES, memories).all()
            turns = self._turns(platform, chat_id, conn.execute(history, recent))  # newest first
            summary = next((turn for turn in turns if turn.kind == "summary"), None)
            if summary is None and (before_id is not None or len(turns) >= limit):
                latest = conn.execute(self._summary, {"chat_pk": chat_pk, "limit": 1})
                summary = next(iter(self._turns(platform, chat_id, latest)), None)
            return turns, summary, conn.execute(NEWEST_MEMORIES, memories).all()

        turns, newest, items = await self._db.read(read)
        through = (newest.meta or {}).get(SUMMARY_THROUGH, 0) if newest else 0
        if not isinstance(through, int) or isinstance(through, bool):
            through = 0  # a summary whose meta names no turn covers none
        fresh = [t for t in reversed(turns) if t.id > through and t.kind != "summary"]
        return TurnMaterial(
            history=fresh,
            summary=newest,
            memories=memory_items(platform, sender_id, items),
            summary_through=through,
        )

    @staticmethod
    def _turns(platform: str, chat_id: str, rows: Iterable[Any]) -> list[Turn]:
        """Rows of the history statements as Turns (positional: this runs for every row
        of every turn's history)."""
        return [
            Turn(
                id_,
                platform,
                chat_id,
                role,
                kind,
                content,
                tokens,
                sender,
                name,
                pmid,
                _meta(meta),
                at,
            )
            for id_, role, kind, content, tokens, pmid, meta, at, sender, name in rows
        ]

    async def turn_content(self, turn_id: int) -> Turn | None:
        """One stored turn by id (its chat named in the result), or None if it is gone."""
        query = (
            select(*_TURN_COLUMNS, Chat.platform, Chat.platform_chat_id)
            .join(Chat, Chat.id == TurnRow.chat_id)
            .outerjoin(User, User.id == TurnRow.sender_user_id)
            .where(TurnRow.id == turn_id)
        )
        row = await self._db.read(lambda conn: conn.execute(query).first())
        if row is None:
            return None
        *turn, platform, chat_id = row
        return self._turns(platform, chat_id, [turn])[0]
