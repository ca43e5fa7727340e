"""Is a chat private or a group? One indexed read, remembered.

Why: on the HTTP API the caller names the chat, and a group request naming a person's
private chat id (or a private request landing in a group's id) would put that chat's
history into someone else's model request. The HTTP channel asks this before accepting
a message and refuses a request whose kind differs from the stored chat's.
"""

from __future__ import annotations

from cachetools import LRUCache
from sqlalchemy import select

from memory.migrate import Database
from memory.models import Chat
from memory.types import ChatKey

KINDS_KEPT = 10_000


class ChatKinds:
    """`kind(platform, chat_id)`: the stored chat_type ("private"/"group"), or None."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._known: LRUCache[ChatKey, str] = LRUCache(maxsize=KINDS_KEPT)

    async def kind(self, platform: str, chat_id: str) -> str | None:
        key = ChatKey(platform, chat_id)
        known = self._known.get(key)
        if known is not None:
            return known
        query = select(Chat.chat_type).where(
            Chat.platform == platform, Chat.platform_chat_id == chat_id
        )
        found = await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())
        if found is not None:
            self._known[key] = str(found)
        return None if found is None else str(found)
