"""SqlStorage: chat history and long-term memory on SQLite or PostgreSQL.

One class implements both TurnStore and MemoryStore (memory/types.py) so the daemon
opens one set of connections. Each call is one transaction run by `Database`
(memory/migrate.py). User and chat row ids are cached per instance, so a turn in a
known chat costs one INSERT; the caches are only touched on the event loop's thread and
only learn ids whose transaction committed.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Insert, ScalarSelect, Select, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from memory.migrate import Database, head_revision, parse_url, revision_of, upgrade_connection
from memory.models import (
    MEMORY_MAX_CHARS,
    NAME_LEN,
    Chat,
    MemoryRow,
    TurnRow,
    User,
    check_key,
    check_turn,
    clean_text,
    memory_author,
    memory_hash,
    memory_text,
    normalise_memory,
    utc,
)
from memory.types import SUMMARY_THROUGH, MemoryItem, NewTurn, Turn, TurnMaterial

log = logging.getLogger(__name__)

__all__ = ["MEMORY_MAX_CHARS", "SqlStorage", "open_storage"]

CACHE_SIZE = 10_000
LOCK_POOL_SIZE = 20

K = TypeVar("K")
V = TypeVar("V")
UserKey = tuple[str, str]  # (platform, platform user id)
ChatKey = tuple[str, str]  # (platform, platform chat id)


class _Duplicate(Exception):
    """Raised inside a write to roll it back when the row was stored before."""


class _Lru(Generic[K, V]):
    """A bounded mapping that forgets the least recently used entries."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)


class _Ids:
    """Row ids known to one transaction: from the caches, plus what it created."""

    def __init__(self) -> None:
        self.users: dict[UserKey, tuple[int, str | None]] = {}
        self.chats: dict[ChatKey, int] = {}
        self.learned_users: dict[UserKey, tuple[int, str | None]] = {}
        self.learned_chats: dict[ChatKey, int] = {}


def _lock_key(platform: str, chat_id: str) -> int:
    """A stable signed 64-bit advisory-lock key for one chat (same on every replica)."""
    digest = hashlib.blake2b(f"chat\x00{platform}\x00{chat_id}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def _user_pk_query(platform: str, user_id: str) -> ScalarSelect[int]:
    return (
        select(User.id)
        .where(User.platform == platform, User.platform_user_id == user_id)
        .scalar_subquery()
    )


class SqlStorage:
    """TurnStore + MemoryStore over a `Database`. Build it with open_storage()."""

    def __init__(self, database: Database, *, cache_size: int = CACHE_SIZE) -> None:
        self._db = database
        self._users: _Lru[UserKey, tuple[int, str | None]] = _Lru(cache_size)
        self._chats: _Lru[ChatKey, int] = _Lru(cache_size)
        insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert
        self._insert_turn: Insert = (
            insert(TurnRow)
            .on_conflict_do_nothing(index_elements=["chat_id", "platform_message_id"])
            .returning(TurnRow.id)
        )
        self._insert_memory: Insert = (
            insert(MemoryRow)
            .on_conflict_do_nothing(index_elements=["user_id", "content_hash"])
            .returning(MemoryRow.id)
        )
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
        recent = (
            select(
                TurnRow.id,
                TurnRow.role,
                TurnRow.kind,
                TurnRow.content,
                TurnRow.token_count,
                TurnRow.platform_message_id,
                TurnRow.meta,
                TurnRow.created_at,
                User.platform_user_id,
                User.display_name,
            )
            .outerjoin(User, User.id == TurnRow.sender_user_id)
            .where(TurnRow.chat_id == bindparam("chat_pk"))
            .order_by(TurnRow.id.desc())
            .limit(bindparam("limit"))
        )
        self._recent = recent
        self._recent_before = recent.where(TurnRow.id < bindparam("before_id"))
        self._summary = recent.where(TurnRow.kind == "summary")
        chat = insert(Chat)
        self._upsert_chat = chat.on_conflict_do_update(
            index_elements=["platform", "platform_chat_id"],
            set_={"chat_type": chat.excluded.chat_type},
        ).returning(Chat.id)

    @property
    def dialect(self) -> str:
        return self._db.dialect

    async def close(self) -> None:
        await self._db.close()

    # -- row ids --------------------------------------------------------------------------

    def _ids_for(self, users: Sequence[UserKey], chats: Sequence[ChatKey]) -> _Ids:
        ids = _Ids()
        for user_key in users:
            if (cached_user := self._users.get(user_key)) is not None:
                ids.users[user_key] = cached_user
        for chat_key in chats:
            if (cached_chat := self._chats.get(chat_key)) is not None:
                ids.chats[chat_key] = cached_chat
        return ids

    def _learn(self, ids: _Ids) -> None:
        for user_key, user in ids.learned_users.items():
            self._users.put(user_key, user)
        for chat_key, chat_pk in ids.learned_chats.items():
            self._chats.put(chat_key, chat_pk)

    def _user_pk(self, conn: Connection, ids: _Ids, key: UserKey, name: str | None) -> int:
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

    def _chat_pk(self, conn: Connection, ids: _Ids, key: ChatKey, chat_type: str) -> int:
        known = ids.chats.get(key)
        if known is not None:
            return known
        values = {
            "platform": key[0],
            "platform_chat_id": key[1],
            "chat_type": chat_type,
            "created_at": utc(None),
        }
        chat_pk = int(conn.execute(self._upsert_chat, values).scalar_one())
        ids.chats[key] = ids.learned_chats[key] = chat_pk
        return chat_pk

    async def _find_chat(self, key: ChatKey) -> int | None:
        """The chats.id of an existing chat, or None (never creates one)."""
        cached = self._chats.get(key)
        if cached is not None:
            return cached
        query = select(Chat.id).where(Chat.platform == key[0], Chat.platform_chat_id == key[1])
        found = await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())
        if found is not None:
            self._chats.put(key, found)
        return found

    # -- TurnStore ------------------------------------------------------------------------

    def _store_turns(self, conn: Connection, ids: _Ids, turns: Sequence[NewTurn]) -> list[Turn]:
        stored: list[Turn] = []
        for turn in turns:
            chat_pk = self._chat_pk(conn, ids, (turn.platform, turn.chat_id), str(turn.chat_type))
            sender_pk, name = None, None
            if turn.sender_id is not None:
                if turn.sender_name is not None:
                    name = clean_text(turn.sender_name)[:NAME_LEN]
                sender_pk = self._user_pk(conn, ids, (turn.platform, turn.sender_id), name)
            created, content, meta = utc(turn.created_at), clean_text(turn.content), dict(turn.meta)
            params = {
                "chat_id": chat_pk,
                "sender_user_id": sender_pk,
                "role": turn.role,
                "kind": turn.kind,
                "content": content,
                "token_count": turn.token_count,
                "platform_message_id": turn.platform_message_id,
                "meta": meta,
                "created_at": created,
            }
            turn_pk = conn.execute(self._insert_turn, params).scalar_one_or_none()
            if turn_pk is not None:
                stored.append(
                    Turn(
                        id=int(turn_pk),
                        platform=turn.platform,
                        chat_id=turn.chat_id,
                        role=turn.role,
                        kind=turn.kind,
                        content=content,
                        token_count=turn.token_count,
                        sender_id=turn.sender_id,
                        sender_name=name,
                        platform_message_id=turn.platform_message_id,
                        meta=meta,
                        created_at=created,
                    )
                )
        return stored

    def _ids_for_turns(self, turns: Sequence[NewTurn]) -> _Ids:
        users = [(t.platform, t.sender_id) for t in turns if t.sender_id is not None]
        return self._ids_for(users, [(t.platform, t.chat_id) for t in turns])

    async def add_turn(self, turn: NewTurn) -> Turn | None:
        """Store a turn; None (and nothing written) when its platform message id was seen."""
        check_turn(turn)
        ids = self._ids_for_turns([turn])

        def write(conn: Connection) -> Turn:
            stored = self._store_turns(conn, ids, [turn])
            if not stored:
                raise _Duplicate  # roll back whatever the user/chat upserts did
            return stored[0]

        try:
            stored = await self._db.write(write)
        except _Duplicate:
            return None
        self._learn(ids)
        return stored

    async def add_turns(self, turns: list[NewTurn]) -> list[Turn]:
        """Store turns in one transaction; duplicates are skipped, any error stores none."""
        for turn in turns:
            check_turn(turn)
        if not turns:
            return []
        ids = self._ids_for_turns(turns)
        stored = await self._db.write(lambda conn: self._store_turns(conn, ids, turns))
        self._learn(ids)
        return stored

    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]:
        """The newest `limit` turns of one chat (older than `before_id`), oldest first."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"limit must be a non-negative integer, not {limit!r}")
        chat_pk = await self._find_chat((platform, chat_id)) if limit else None
        if chat_pk is None:
            return []
        params = {"chat_pk": chat_pk, "limit": limit, "before_id": before_id}
        query = self._recent if before_id is None else self._recent_before
        rows = await self._db.read(lambda conn: conn.execute(query, params).all())
        return self._turns(platform, chat_id, reversed(rows))

    async def turn_material(
        self, platform: str, chat_id: str, sender_id: str, limit: int, before_id: int
    ) -> TurnMaterial:
        """What one turn's context needs, in one database round trip: the chat's recent
        turns before `before_id` that come after its latest summary, that summary, and
        the sender's memories."""
        chat_pk = await self._find_chat((platform, chat_id))
        memories = _memories_query(platform, sender_id, newest_first=True)
        recent = {"chat_pk": chat_pk, "limit": limit, "before_id": before_id}
        latest = {"chat_pk": chat_pk, "limit": 1}

        def read(conn: Connection) -> tuple[Sequence[Any], Sequence[Any], Sequence[Any]]:
            if chat_pk is None:
                return [], [], conn.execute(memories).all()
            return (
                conn.execute(self._recent_before, recent).all(),
                conn.execute(self._summary, latest).all(),
                conn.execute(memories).all(),
            )

        turns, summary, items = await self._db.read(read)
        found = self._turns(platform, chat_id, summary)
        newest = found[0] if found else None
        through = (newest.meta or {}).get(SUMMARY_THROUGH, 0) if newest else 0
        if not isinstance(through, int) or isinstance(through, bool):
            through = 0  # a summary whose meta names no turn covers none
        fresh = [r for r in reversed(turns) if r.id > through and r.kind != "summary"]
        return TurnMaterial(
            history=self._turns(platform, chat_id, fresh),
            summary=newest,
            memories=_memory_items(platform, sender_id, items),
            summary_through=through,
        )

    async def latest_summary(self, platform: str, chat_id: str) -> Turn | None:
        """The chat's newest `summary` turn (what compaction folded), if any."""
        chat_pk = await self._find_chat((platform, chat_id))
        if chat_pk is None:
            return None
        params = {"chat_pk": chat_pk, "limit": 1}
        rows = await self._db.read(lambda conn: conn.execute(self._summary, params).all())
        found = self._turns(platform, chat_id, rows)
        return found[0] if found else None

    @staticmethod
    def _turns(platform: str, chat_id: str, rows: Iterable[Any]) -> list[Turn]:
        return [
            Turn(
                id=r.id,
                platform=platform,
                chat_id=chat_id,
                role=r.role,
                kind=r.kind,
                content=r.content,
                token_count=r.token_count,
                sender_id=r.platform_user_id,
                sender_name=r.display_name,
                platform_message_id=r.platform_message_id,
                meta=r.meta or {},
                created_at=r.created_at,
            )
            for r in rows
        ]

    async def clear_history(self, platform: str, chat_id: str) -> int:
        """Delete one chat's turns (the chat row and its members stay); returns how many."""
        chat_pk = await self._find_chat((platform, chat_id))
        if chat_pk is None:
            return 0
        statement = delete(TurnRow).where(TurnRow.chat_id == chat_pk)
        return await self._db.write(lambda conn: int(conn.execute(statement).rowcount))

    def chat_lock(self, platform: str, chat_id: str) -> AbstractAsyncContextManager[None]:
        """Serialise one chat across replicas (PostgreSQL advisory lock; no-op on SQLite)."""
        if self._db.dialect == "sqlite":
            return nullcontext()
        return self._db.advisory_lock(_lock_key(platform, chat_id))

    # -- MemoryStore ----------------------------------------------------------------------

    async def _add_memories(
        self, platform: str, user_id: str, rows: Sequence[tuple[str, str, datetime]]
    ) -> list[MemoryItem]:
        key = (platform, user_id)
        ids = self._ids_for([key], [])

        def write(conn: Connection) -> list[MemoryItem]:
            user_pk = self._user_pk(conn, ids, key, None)
            added: list[MemoryItem] = []
            for content, author, created in rows:
                values = {
                    "user_id": user_pk,
                    "content": content,
                    "content_hash": memory_hash(content),
                    "author": author,
                    "created_at": created,
                }
                pk = conn.execute(self._insert_memory, values).scalar_one_or_none()
                if pk is not None:
                    added.append(MemoryItem(int(pk), platform, user_id, content, author, created))
            return added

        added = await self._db.write(write)
        self._learn(ids)
        return added

    async def add_memory(
        self, platform: str, user_id: str, content: str, author: str
    ) -> MemoryItem | None:
        """Add one memory (stripped, at most MEMORY_MAX_CHARS); None if already known."""
        check_key("memory user", platform, user_id)
        row = (memory_text(content), memory_author(author), utc(None))
        added = await self._add_memories(platform, user_id, [row])
        return added[0] if added else None

    async def _memories(self, platform: str, user_id: str, newest_first: bool) -> list[MemoryItem]:
        query = _memories_query(platform, user_id, newest_first)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return _memory_items(platform, user_id, rows)

    async def list_memories(self, platform: str, user_id: str) -> list[MemoryItem]:
        """Newest first."""
        return await self._memories(platform, user_id, newest_first=True)

    async def delete_memory(self, platform: str, user_id: str, memory_id: int) -> bool:
        """Delete one memory, only if it belongs to this user."""
        statement = delete(MemoryRow).where(
            MemoryRow.id == memory_id, MemoryRow.user_id == _user_pk_query(platform, user_id)
        )
        return await self._db.write(lambda conn: bool(conn.execute(statement).rowcount))

    async def clear_memories(self, platform: str, user_id: str) -> int:
        statement = delete(MemoryRow).where(MemoryRow.user_id == _user_pk_query(platform, user_id))
        return await self._db.write(lambda conn: int(conn.execute(statement).rowcount))

    async def search_memories(self, platform: str, user_id: str, text: str) -> list[MemoryItem]:
        """Case-insensitive substring search, newest first (casefold works beyond ASCII)."""
        needle = normalise_memory(text) if isinstance(text, str) else ""
        if not needle:
            raise ValueError("memory search: the search text is empty")
        items = await self._memories(platform, user_id, newest_first=True)
        return [m for m in items if needle in normalise_memory(m.content)]

    async def export_memories(self, platform: str, user_id: str) -> AsyncIterator[dict[str, Any]]:
        """Oldest first, one JSON-ready dict per memory (a JSON Lines row each)."""
        for item in await self._memories(platform, user_id, newest_first=False):
            yield {
                "content": item.content,
                "author": item.author,
                "created_at": item.created_at.isoformat(),
            }

    async def import_memories(self, platform: str, user_id: str, rows: list[dict[str, Any]]) -> int:
        """Add exported rows (all checked first; one bad row imports none); returns new ones."""
        check_key("memory user", platform, user_id)
        checked: list[tuple[str, str, datetime]] = []
        for number, row in enumerate(rows, start=1):
            where = f"import row {number}"
            if not isinstance(row, dict):
                raise ValueError(f"{where}: expected an object")
            created = row.get("created_at")
            if isinstance(created, str):
                try:
                    created = datetime.fromisoformat(created)
                except ValueError:
                    raise ValueError(f"{where}: created_at is not an ISO-8601 time") from None
            elif created is not None and not isinstance(created, datetime):
                raise ValueError(f"{where}: created_at is not an ISO-8601 time")
            content = memory_text(row.get("content"), where)
            checked.append(
                (content, memory_author(row.get("author", "import"), where), utc(created))
            )
        if not checked:
            return 0
        return len(await self._add_memories(platform, user_id, checked))


def _memories_query(
    platform: str, user_id: str, newest_first: bool
) -> Select[int, str, str, datetime]:
    order = [MemoryRow.created_at, MemoryRow.id]
    return (
        select(MemoryRow.id, MemoryRow.content, MemoryRow.author, MemoryRow.created_at)
        .where(MemoryRow.user_id == _user_pk_query(platform, user_id))
        .order_by(*[c.desc() for c in order] if newest_first else order)
    )


def _memory_items(platform: str, user_id: str, rows: Iterable[Any]) -> list[MemoryItem]:
    return [MemoryItem(r.id, platform, user_id, r.content, r.author, r.created_at) for r in rows]


async def open_storage(
    url: str, *, migrate: bool = True, lock_pool_size: int = LOCK_POOL_SIZE
) -> SqlStorage:
    """Open (and by default migrate) the database at `url`.

    `lock_pool_size` bounds the PostgreSQL connections chat_lock holds at once; keep the
    daemon's number of chats in flight at or below it.
    """
    database = Database(parse_url(url), lock_pool_size=lock_pool_size)
    try:
        if migrate:
            await database.migrate(upgrade_connection)
        else:
            found, wanted = await database.read(revision_of), head_revision()
            if found != wanted:
                raise RuntimeError(
                    f"database schema is at {found or 'nothing'}, this chatterd needs "
                    f"{wanted}: run `chatterd db upgrade`"
                )
    except BaseException:
        await database.close()
        raise
    log.info("storage open (%s)", database.dialect)
    return SqlStorage(database)
