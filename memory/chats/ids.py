"""Row ids of users and chats, shared by the turn and the memory half of the store.

Turns and memories both hang off a `users` row (turns also off a `chats` row). Looking
that row up on every write would double the work of a turn, so `RowIds` keeps the ids in
two bounded LRU caches. The caches are only touched on the event loop's thread and only
learn ids whose transaction committed: a write collects what it created in a `TxIds`
and hands it to `learn()` after the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from memory.chats.models import Chat, User
from memory.chats.types import ChatKey
from memory.db.migrate import Database
from memory.db.rows import utc

CACHE_SIZE = 10_000

UserKey = tuple[str, str]  # (platform, platform user id)
KnownUser = tuple[int, str | None]  # (users.id, display name stored)


@dataclass
class TxIds:
    """Row ids known to one transaction: from the caches, plus what it created."""

    users: dict[UserKey, KnownUser] = field(default_factory=dict)
    chats: dict[ChatKey, int] = field(default_factory=dict)
    learned_users: dict[UserKey, KnownUser] = field(default_factory=dict)
    learned_chats: dict[ChatKey, int] = field(default_factory=dict)


class RowIds:
    """users.id and chats.id by platform key: cached, created on first sight."""

    def __init__(self, database: Database, *, cache_size: int = CACHE_SIZE) -> None:
        self._db = database
        self._users: LRUCache[UserKey, KnownUser] = LRUCache(cache_size)
        self._chats: LRUCache[ChatKey, int] = LRUCache(cache_size)
        insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert
        user = insert(User)
        self._upsert_user = user.on_conflict_do_update(
            index_elements=["platform", "platform_user_id"],
            set_={"display_name": user.excluded.display_name},
        ).returning(User.id)
        # A no-op update, so that RETURNING yields the id of an existing row too.
        self._ensure_user = user.on_conflict_do_update(
            index_elements=["platform", "platform_user_id"],
            set_={"platform": user.excluded.platform},
        ).returning(User.id, User.display_name)
        chat = insert(Chat)
        self._upsert_chat = chat.on_conflict_do_update(
            index_elements=["platform", "platform_chat_id"],
            set_={"chat_type": chat.excluded.chat_type},
        ).returning(Chat.id)

    def known(self, users: Sequence[UserKey], chats: Sequence[ChatKey]) -> TxIds:
        """What the caches know about these keys, as a new transaction's starting point."""
        ids = TxIds()
        for user_key in users:
            if (cached_user := self._users.get(user_key)) is not None:
                ids.users[user_key] = cached_user
        for chat_key in chats:
            if (cached_chat := self._chats.get(chat_key)) is not None:
                ids.chats[chat_key] = cached_chat
        return ids

    def learn(self, ids: TxIds) -> None:
        """Remember the rows a committed transaction created or renamed."""
        for user_key, user in ids.learned_users.items():
            self._users[user_key] = user
        for chat_key, chat_pk in ids.learned_chats.items():
            self._chats[chat_key] = chat_pk

    def user_pk(self, conn: Connection, ids: TxIds, key: UserKey, name: str | None) -> int:
        """users.id for `key`, creating the row, or renaming it when `name` changed."""
        known = ids.users.get(key)
        if known is not None and (name is None or name == known[1]):
            return known[0]
        values: dict[str, Any] = {
            "platform": key[0],
            "platform_user_id": key[1],
            "created_at": utc(None),
        }
        if name is None:
            user_pk, stored_name = conn.execute(self._ensure_user, values).one()
        else:
            values["display_name"] = stored_name = name
            user_pk = conn.execute(self._upsert_user, values).scalar_one()
        ids.users[key] = ids.learned_users[key] = (int(user_pk), stored_name)
        return int(user_pk)

    def chat_pk(self, conn: Connection, ids: TxIds, key: ChatKey, chat_type: str) -> int:
        """chats.id for `key`, creating the row on first sight."""
        known = ids.chats.get(key)
        if known is not None:
            return known
        values = {
            "platform": key.platform,
            "platform_chat_id": key.chat_id,
            "chat_type": chat_type,
            "created_at": utc(None),
        }
        chat_pk = int(conn.execute(self._upsert_chat, values).scalar_one())
        ids.chats[key] = ids.learned_chats[key] = chat_pk
        return chat_pk

    async def find_chat(self, key: ChatKey) -> int | None:
        """The chats.id of an existing chat, or None (never creates one)."""
        cached = self._chats.get(key)
        if cached is not None:
            return cached
        query = select(Chat.id).where(
            Chat.platform == key.platform, Chat.platform_chat_id == key.chat_id
        )
        found = await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())
        if found is not None:
            self._chats[key] = found
        return found
