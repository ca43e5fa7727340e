"""SqlStorage: chat history and long-term memory on SQLite or PostgreSQL.

One class implements both TurnStore (memory/turns/types.py) and MemoryStore
(memory/memories/types.py) so the daemon opens one set of connections. Turn writes live
here, turn reads in memory.turns.reads.TurnReads, the memory half in
memory.memories.store.MemoryRows; all find user and chat rows through one
memory.chats.ids.RowIds, so a turn in a known chat costs one INSERT. Each call is one
transaction run by `Database` (memory/db/migrate.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, get_args

from sqlalchemy import Connection, Insert, bindparam, delete, func, update
from sqlalchemy.dialects import postgresql, sqlite

from memory.chats.ids import CACHE_SIZE, RowIds, TxIds
from memory.chats.models import Chat
from memory.chats.settings import ChatSettingsStore
from memory.chats.types import ChatKey
from memory.db.migrate import Database, head_revision, parse_url, revision_of, upgrade_connection
from memory.db.rows import ID_LEN, NAME_LEN, check_key, clean_text, utc
from memory.jobs.store import JobStore
from memory.leases.store import LeaseStore
from memory.memories.store import MemoryRows
from memory.memories.types import MemoryItem, NewMemory
from memory.moderation.store import SqlModerationStore
from memory.reminders.store import ReminderStore
from memory.turns.intake import AfterWrite, IntakeConflict, IntakeStore, claim_in, settle_in
from memory.turns.models import TurnRow
from memory.turns.reads import TurnReads
from memory.turns.types import NewTurn, Role, Turn, TurnKind, TurnMaterial, TurnState
from memory.usage.store import UsageStore
from memory.usage.tool_calls import ToolCallStore

log = logging.getLogger(__name__)

__all__ = ["SqlStorage", "open_storage"]

POOL_SIZE = 15


class _Duplicate(Exception):
    """Raised inside a write to roll it back when the row was stored before."""


def chat_lease_name(platform: str, chat_id: str) -> str:
    """The lease that orders one chat's turns (the same on every replica)."""
    return f"chat:{platform}:{chat_id}"


class SqlStorage:
    """TurnStore + MemoryStore over a `Database`. Build it with open_storage()."""

    def __init__(self, database: Database, *, cache_size: int = CACHE_SIZE) -> None:
        self._db = database
        self.leases = LeaseStore(database)  # chat order, reminder sends across replicas
        self.intake = IntakeStore(database, self.leases)
        self.chat_settings = ChatSettingsStore(database)  # /bot on|off|allow|persona|wake
        self.usage = UsageStore(database)  # token counters: /usage, quotas, the console
        self.tool_calls = ToolCallStore(database)  # MCP tool calls: usage, the console
        self.reminders = ReminderStore(database)  # /remind, /schedule (migration 0009)
        self.jobs = JobStore(database)  # work that outlives a turn (migration 0011)
        self.moderation = SqlModerationStore(database)  # /mod: rules, actions (0014)
        self._ids = RowIds(database, cache_size=cache_size)
        self._memory = MemoryRows(database, self._ids)
        self._reads = TurnReads(database, self._ids)
        insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert
        self._insert_turn: Insert = (
            insert(TurnRow)
            .on_conflict_do_nothing(index_elements=["chat_id", "platform_message_id"])
            .returning(TurnRow.id)
        )
        # The chat's activity, kept in the transaction that stores its turns (0006).
        self._touch_chat = (
            update(Chat)
            .where(Chat.id == bindparam("chat_pk"))
            .values(
                last_active_at=bindparam("now"),
                turn_count=Chat.turn_count + bindparam("stored"),
                title=func.coalesce(bindparam("new_title"), Chat.title),
            )
        )

    @property
    def dialect(self) -> str:
        return self._db.dialect

    @property
    def database(self) -> Database:
        """The connections, for read models over the same tables (memory/console/browse.py)."""
        return self._db

    async def close(self) -> None:
        await self.leases.close()
        await self._db.close()

    async def _find_chat(self, key: ChatKey) -> int | None:
        """The chats.id of an existing chat, or None (never creates one)."""
        return await self._ids.find_chat(key)

    # -- TurnStore ------------------------------------------------------------------------

    def _store_turns(self, conn: Connection, ids: TxIds, turns: Sequence[NewTurn]) -> list[Turn]:
        stored: list[Turn] = []
        touched: dict[int, dict[str, Any]] = {}  # chats.id -> its activity update
        for turn in turns:
            chat_key = ChatKey(turn.platform, turn.chat_id)
            chat_pk = self._ids.chat_pk(conn, ids, chat_key, str(turn.chat_type))
            sender_pk, name = None, None
            if turn.sender_id is not None:
                if turn.sender_name is not None:
                    name = clean_text(turn.sender_name)[:NAME_LEN]
                sender_pk = self._ids.user_pk(conn, ids, (turn.platform, turn.sender_id), name)
            created, content, meta = utc(turn.created_at), clean_text(turn.content), dict(turn.meta)
            # The columns a Turn names alike; the row adds its chat and sender keys.
            values: dict[str, Any] = {
                "role": turn.role,
                "kind": turn.kind,
                "content": content,
                "token_count": turn.token_count,
                "platform_message_id": turn.platform_message_id,
                "meta": meta,
                "created_at": created,
            }
            params = {"chat_id": chat_pk, "sender_user_id": sender_pk, **values}
            turn_pk = conn.execute(self._insert_turn, params).scalar_one_or_none()
            if turn_pk is not None:
                touch = touched.setdefault(
                    chat_pk, {"chat_pk": chat_pk, "stored": 0, "new_title": None}
                )
                touch["stored"] += 1
                touch["new_title"] = _title_of(turn, name) or touch["new_title"]
                stored.append(
                    Turn(
                        id=int(turn_pk),
                        platform=turn.platform,
                        chat_id=turn.chat_id,
                        sender_id=turn.sender_id,
                        sender_name=name,
                        **values,
                    )
                )
        self._touch_chats(conn, list(touched.values()))
        return stored

    def _touch_chats(self, conn: Connection, touched: list[dict[str, Any]]) -> None:
        """Each chat that got turns: now active, `stored` more turns, maybe a new title."""
        now = utc(None)
        for touch in touched:
            conn.execute(self._touch_chat, {**touch, "now": now})

    def _ids_for_turns(self, turns: Sequence[NewTurn]) -> TxIds:
        users = [(t.platform, t.sender_id) for t in turns if t.sender_id is not None]
        return self._ids.known(users, [ChatKey(t.platform, t.chat_id) for t in turns])

    async def add_turn(self, turn: NewTurn, then: AfterWrite | None = None) -> Turn | None:
        """Store a turn; None (and nothing written) when its platform message id was seen.

        `then(conn, [turn])` runs in the same transaction (an intake state change); if
        it raises, nothing is stored and the exception propagates.
        """
        check_turn(turn)
        ids = self._ids_for_turns([turn])

        def write(conn: Connection) -> Turn:
            stored = self._store_turns(conn, ids, [turn])
            if not stored:
                raise _Duplicate  # roll back whatever the user/chat upserts did
            if then is not None:
                then(conn, stored)
            return stored[0]

        try:
            stored = await self._db.write(write)
        except _Duplicate:
            return None
        self._ids.learn(ids)
        return stored

    async def add_turns(self, turns: list[NewTurn], then: AfterWrite | None = None) -> list[Turn]:
        """Store turns in one transaction; duplicates are skipped, any error stores none.

        `then(conn, stored)` runs in the same transaction, after the inserts.
        """
        for turn in turns:
            check_turn(turn)
        if not turns and then is None:
            return []
        ids = self._ids_for_turns(turns)

        def write(conn: Connection) -> list[Turn]:
            stored = self._store_turns(conn, ids, turns) if turns else []
            if then is not None:
                then(conn, stored)
            return stored

        stored = await self._db.write(write)
        self._ids.learn(ids)
        return stored

    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]:
        """The newest `limit` turns of one chat (older than `before_id`), oldest first."""
        return await self._reads.recent_turns(platform, chat_id, limit, before_id)

    async def turn_material(
        self, platform: str, chat_id: str, sender_id: str, limit: int, before_id: int | None
    ) -> TurnMaterial:
        """What one turn's context needs in one round trip (memory.turns.reads)."""
        return await self._reads.turn_material(platform, chat_id, sender_id, limit, before_id)

    async def turn_content(self, turn_id: int) -> Turn | None:
        """One stored turn by id (its chat named in the result), or None if it is gone."""
        return await self._reads.turn_content(turn_id)

    async def claim(self, entry_id: int) -> bool:
        """Count one more attempt at a pending intake row; False when it is not pending."""
        try:
            await self._db.write(lambda conn: claim_in(conn, entry_id))
        except IntakeConflict:
            return False
        return True

    async def settle(
        self,
        entry_id: int,
        turns: list[NewTurn],
        state: TurnState,
        *,
        merged: Sequence[int] = (),
    ) -> bool:
        """Store `turns` (user turn first) and move the intake row out of `pending`, naming
        the stored user turn and reply, in one transaction; False, with nothing stored,
        when the row was no longer pending (someone else answered it).

        `merged`: a burst's earlier rows, answered by the same reply; their user turns
        come first in `turns`, in order. They settle in the same transaction, naming
        their own user turn and the reply, as `delivered` when the reply is `answered`:
        only `entry_id` carries the reply's delivery, so recovery never sends it twice.
        """
        users = len(merged) + 1

        def then(conn: Connection, stored: list[Turn]) -> None:
            reply = stored[-1].id if stored and stored[-1].role != "user" else None
            for index, row in enumerate(merged):
                user = stored[index].id if len(stored) > index else None
                carried: TurnState = "delivered" if state == "answered" else state
                settle_in(conn, row, carried, reply, user_turn_id=user)
            head = stored[users - 1] if len(stored) >= users else None
            user = head.id if head is not None and head.role == "user" else None
            settle_in(conn, entry_id, state, reply, user_turn_id=user)

        try:
            await self.add_turns(turns, then=then)
        except IntakeConflict:
            return False
        return True

    async def clear_history(self, platform: str, chat_id: str) -> int:
        """Delete one chat's turns (the chat row and its members stay); returns how many."""
        chat_pk = await self._find_chat(ChatKey(platform, chat_id))
        if chat_pk is None:
            return 0
        statement = delete(TurnRow).where(TurnRow.chat_id == chat_pk)
        recount = update(Chat).where(Chat.id == chat_pk).values(turn_count=0)

        def write(conn: Connection) -> int:
            removed = int(conn.execute(statement).rowcount)
            conn.execute(recount)
            return removed

        return await self._db.write(write)

    def chat_lock(self, platform: str, chat_id: str) -> AbstractAsyncContextManager[object]:
        """Serialise one chat across replicas (a lease row on PostgreSQL, waited for;
        no-op on SQLite). No connection is held while the block runs."""
        return self.leases.hold(chat_lease_name(platform, chat_id))

    def try_chat_lock(self, platform: str, chat_id: str) -> AbstractAsyncContextManager[bool]:
        """The chat's lease if free right now (True), else False at once, never waiting.

        Recovery uses it so a live replica's turn in flight is never taken over.
        """
        return self.leases.hold(chat_lease_name(platform, chat_id), wait=False)

    # -- MemoryStore: memory.memories.store.MemoryRows ----------------------------------------

    async def add_memory(
        self, platform: str, user_id: str, content: str, author: str
    ) -> MemoryItem | None:
        """Add one memory (stripped); None if the same memory is already stored."""
        return await self._memory.add_memory(platform, user_id, content, author)

    async def add_memories(
        self, platform: str, user_id: str, memories: Sequence[NewMemory]
    ) -> list[MemoryItem]:
        """Add memories in one transaction (all checked first); returns the new ones."""
        return await self._memory.add_memories(platform, user_id, memories)

    async def list_memories(self, platform: str, user_id: str) -> list[MemoryItem]:
        """Newest first."""
        return await self._memory.list_memories(platform, user_id)

    async def delete_memory(self, platform: str, user_id: str, memory_id: int) -> bool:
        """Delete one memory, only if it belongs to this user."""
        return await self._memory.delete_memory(platform, user_id, memory_id)

    async def clear_memories(self, platform: str, user_id: str) -> int:
        return await self._memory.clear_memories(platform, user_id)


def _title_of(turn: NewTurn, sender_name: str | None) -> str | None:
    """What a stored turn says the chat is called: the group's name where the channel
    gave one; for a private chat, the name of the person in it."""
    if turn.chat_title:
        return clean_text(turn.chat_title)[:NAME_LEN]
    if turn.chat_type == "private" and turn.role == "user":
        return sender_name
    return None


async def open_storage(
    url: str,
    *,
    migrate: bool = True,
    pool_size: int = POOL_SIZE,
    before_migrate: Callable[[Database], Awaitable[None]] | None = None,
    replica: str | None = None,
) -> SqlStorage:
    """Open (and by default migrate) the database at `url`.

    `pool_size` bounds the PostgreSQL connections: a turn holds one only for the
    length of each of its transactions, so it need not grow with the turns in flight.
    `before_migrate(database)` runs first (the daemon checks the connection budget);
    `replica` names a daemon among the others sharing a PostgreSQL database.
    """
    database = Database(parse_url(url), pool_size=pool_size, replica=replica)
    try:
        if before_migrate is not None:
            await before_migrate(database)
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
    storage = SqlStorage(database)
    if replica is not None:
        storage.leases.start()
    return storage


ROLES = frozenset(get_args(Role))
KINDS = frozenset(get_args(TurnKind))
CHAT_TYPES = frozenset({"private", "group"})


def check_turn(turn: NewTurn) -> None:
    """Reject a malformed turn before anything is written, naming what is wrong."""
    check_key("turn chat", turn.platform, turn.chat_id)
    if turn.sender_id is not None:
        check_key("turn sender", turn.platform, turn.sender_id)
    if turn.chat_type not in CHAT_TYPES:
        raise ValueError(f"turn: chat_type must be private or group, not {turn.chat_type!r}")
    if turn.role not in ROLES:
        raise ValueError(f"turn: role must be one of {sorted(ROLES)}, not {turn.role!r}")
    if turn.kind not in KINDS:
        raise ValueError(f"turn: kind must be one of {sorted(KINDS)}, not {turn.kind!r}")
    if not isinstance(turn.content, str):
        raise ValueError("turn: content must be text")
    if turn.sender_name is not None and not isinstance(turn.sender_name, str):
        raise ValueError("turn: sender_name must be text")
    count = turn.token_count
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count < 2**31:
        raise ValueError(f"turn: token_count must be a non-negative integer, not {count!r}")
    pmid = turn.platform_message_id
    if pmid is not None and (not isinstance(pmid, str) or not pmid or len(pmid) > ID_LEN):
        raise ValueError(f"turn: platform_message_id must be 1..{ID_LEN} characters")
    if not isinstance(turn.meta, dict):
        raise ValueError("turn: meta must be a dict")
    if turn.created_at is not None and not isinstance(turn.created_at, datetime):
        raise ValueError("turn: created_at must be a datetime")
