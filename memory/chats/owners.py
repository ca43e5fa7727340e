"""Who a chat belongs to, where the platform lets callers name chats (the HTTP API).

Why: an HTTP client keeps several private conversations per person by naming each with a
thread id of its own choosing. A thread belongs to the user who first used it: the first
request binds it, atomically (two users racing for a new id: one wins, the other is
refused), on every replica alike, because the binding lives in the database.
"""

from __future__ import annotations

from cachetools import LRUCache
from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from memory.chats.models import ChatOwnerRow
from memory.chats.types import ChatKey
from memory.db.migrate import Database
from memory.db.rows import check_key, utcnow

OWNERS_KEPT = 10_000


class ChatOwners:
    """`claim(platform, chat_id, user_id)`: the chat's owner, `user_id` if it had none."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._known: LRUCache[ChatKey, str] = LRUCache(maxsize=OWNERS_KEPT)

    async def claim(self, platform: str, chat_id: str, user_id: str) -> str:
        check_key("chat owner", platform, chat_id)
        key = ChatKey(platform, chat_id)
        known = self._known.get(key)
        if known is not None:
            return known
        insert = postgresql.insert if self._db.dialect == "postgresql" else sqlite.insert
        bind = (
            insert(ChatOwnerRow)
            .values(platform=platform, named_id=chat_id, owner_id=user_id, created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["platform", "named_id"])
        )
        owner = select(ChatOwnerRow.owner_id).where(
            ChatOwnerRow.platform == platform, ChatOwnerRow.named_id == chat_id
        )

        def write(conn: Connection) -> str:
            conn.execute(bind)
            return str(conn.execute(owner).scalar_one())

        found = await self._db.write(write)
        self._known[key] = found  # an owner never changes
        return found
