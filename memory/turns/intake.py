"""Durable intake: the accepted messages and how far each one's answer got.

Why a table of its own: the conversation (`turns`) must stay in the order people read
it, while an accepted message may wait for its chat's earlier turns. The intake row is
written first, in one small INSERT, and moves pending -> answered -> delivered (or
failed / expired). The state changes that matter for exactly-once are conditional
updates (`... WHERE state = 'pending'`), so two answerers can never both win.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, String, Update, bindparam, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from memory.db.migrate import Database
from memory.db.rows import check_key, clean_text, utc, utcnow
from memory.leases.store import LeaseStore
from memory.turns.models import OPEN_STATES, IntakeRow
from memory.turns.types import IntakeDraft, IntakeEntry, IntakeStats, TurnState


class IntakeConflict(Exception):
    """The row was not in the state a conditional update expected (someone else won)."""


# In IntakeEntry's field order, so a row unpacks into one by position.
_COLUMNS = tuple(getattr(IntakeRow, name) for name in IntakeEntry.__dataclass_fields__)


_FIELDS = tuple(column.key for column in _COLUMNS if column.key != "id")


def _entry(row: Any) -> IntakeEntry:
    return IntakeEntry(*row)


# Built once: the turn path runs these on every message.
_CLAIM = (
    update(IntakeRow)
    .where(IntakeRow.id == bindparam("entry_id"), IntakeRow.state == "pending")
    .values(attempts=IntakeRow.attempts + 1, updated_at=bindparam("now"))
)
_SETTLE = (
    update(IntakeRow)
    .where(IntakeRow.id == bindparam("entry_id"), IntakeRow.state == "pending")
    .values(
        state=bindparam("state"),
        user_turn_id=bindparam("user_turn_id"),
        reply_turn_id=bindparam("reply_turn_id"),
        updated_at=bindparam("now"),
    )
)


def claim_in(conn: Connection, entry_id: int) -> None:
    """An answer starts over (recovery): counts an attempt.

    Raises IntakeConflict, rolling the whole transaction back, unless still pending.
    """
    if conn.execute(_CLAIM, {"entry_id": entry_id, "now": utcnow()}).rowcount != 1:
        raise IntakeConflict(entry_id)


def settle_in(
    conn: Connection,
    entry_id: int,
    state: TurnState,
    reply_turn_id: int | None,
    *,
    user_turn_id: int | None = None,
) -> None:
    """Inside the transaction that stores the turns: pending -> answered (delivered,
    failed), naming the stored user turn and reply.

    Raises IntakeConflict, rolling the whole transaction back, unless still pending.
    """
    params = {
        "entry_id": entry_id,
        "state": state,
        "user_turn_id": user_turn_id,
        "reply_turn_id": reply_turn_id,
    }
    if conn.execute(_SETTLE, {**params, "now": utcnow()}).rowcount != 1:
        raise IntakeConflict(entry_id)


class IntakeStore:
    """The intake table over a `Database`; each method is one transaction or one read."""

    def __init__(self, database: Database, leases: LeaseStore | None = None) -> None:
        """`leases` judges whether a row's owner is alive (recovery leaves its rows)."""
        self._db = database
        self._owner = database.replica
        self._leases = leases
        insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert
        self._accept = (
            insert(IntakeRow)
            .on_conflict_do_nothing(index_elements=["platform", "chat_id", "platform_message_id"])
            .returning(IntakeRow.id)
        )
        self._moves: dict[tuple[int, bool], Update] = {}

    async def accept(self, draft: IntakeDraft, *, queued: bool = True) -> IntakeEntry | None:
        """Store a triggered message as `pending`; None when its message id was seen.
        `queued`: this process answers it (the row names this replica as its owner);
        False leaves it to whichever replica's recovery has room first.

        One INSERT returning only the id: it is on every message's path.
        """
        check_key("intake chat", draft.platform, draft.chat_id)
        check_key("intake sender", draft.platform, draft.sender_id)
        now = utcnow()
        entry = IntakeEntry(
            id=0,
            platform=draft.platform,
            chat_id=draft.chat_id,
            chat_type=draft.chat_type,
            sender_id=draft.sender_id,
            sender_name=clean_text(draft.sender_name)[:256],
            text=clean_text(draft.text),
            platform_message_id=draft.platform_message_id,
            thread_id=draft.thread_id,
            payload=draft.payload,
            state="pending",
            attempts=0,
            user_turn_id=None,
            reply_turn_id=None,
            delivery={},
            received_at=utc(draft.received_at),
            updated_at=now,
        )
        values = {field: getattr(entry, field) for field in _FIELDS}
        values["owner"] = self._owner if queued else None
        found = await self._db.write(lambda conn: conn.execute(self._accept, values).first())
        return replace(entry, id=int(found[0])) if found is not None else None

    async def get(self, entry_id: int) -> IntakeEntry | None:
        query = select(*_COLUMNS).where(IntakeRow.id == entry_id)
        row = await self._db.read(lambda conn: conn.execute(query).first())
        return _entry(row) if row is not None else None

    async def by_message(
        self, platform: str, chat_id: str, platform_message_id: str
    ) -> IntakeEntry | None:
        query = select(*_COLUMNS).where(
            IntakeRow.platform == platform,
            IntakeRow.chat_id == chat_id,
            IntakeRow.platform_message_id == platform_message_id,
        )
        row = await self._db.read(lambda conn: conn.execute(query).first())
        return _entry(row) if row is not None else None

    async def move(
        self,
        entry_id: int,
        state: TurnState,
        *,
        expected: Sequence[TurnState],
        delivery: dict[str, Any] | None = None,
    ) -> bool:
        """Conditional state change; False when the row was not in an expected state."""
        statement = self._move_statement(len(expected), delivery is not None)
        params: dict[str, Any] = {"entry_id": entry_id, "state": state, "now": utcnow()}
        params.update((f"expected_{i}", each) for i, each in enumerate(expected))
        if delivery is not None:
            params["delivery"] = delivery
        done = await self._db.write(lambda conn: conn.execute(statement, params).rowcount)
        return bool(done == 1)

    def _move_statement(self, expected: int, delivery: bool) -> Update:
        """`move`'s UPDATE for `expected` states, built once per shape: every delivered
        reply runs it, and a statement built per call (its IN list expanded at each
        execution) cost more than the write itself."""
        key = (expected, delivery)
        statement = self._moves.get(key)
        if statement is None:
            states = [bindparam(f"expected_{i}", type_=String()) for i in range(expected)]
            values: dict[str, Any] = {"state": bindparam("state"), "updated_at": bindparam("now")}
            if delivery:
                values["delivery"] = bindparam("delivery", type_=IntakeRow.delivery.type)
            statement = (
                update(IntakeRow)
                .where(IntakeRow.id == bindparam("entry_id"), IntakeRow.state.in_(states))
                .values(**values)
            )
            self._moves[key] = statement
        return statement

    async def note_delivery(self, entry_id: int, delivery: dict[str, Any]) -> bool:
        """Record where the reply is being shown (a stream's messages) while the row is
        still open, so recovery completes those messages; False when it is closed."""
        statement = (
            update(IntakeRow)
            .where(IntakeRow.id == entry_id, IntakeRow.state.in_(OPEN_STATES))
            .values(delivery=delivery, updated_at=utcnow())
        )
        done = await self._db.write(lambda conn: conn.execute(statement).rowcount)
        return bool(done == 1)

    async def open_entries(self, limit: int = 100) -> list[IntakeEntry]:
        """Pending and answered rows, oldest first (what recovery has to finish): on
        PostgreSQL only this replica's, nobody's, and those of replicas that are gone."""
        query = (
            select(*_COLUMNS)
            .where(IntakeRow.state.in_(OPEN_STATES))
            .order_by(IntakeRow.id)
            .limit(limit)
        )
        params: dict[str, object] = {}
        if self._leases is not None and self._leases.enabled:
            dead, params = self._leases.dead_sql("intake.owner")
            mine = IntakeRow.owner == self._owner if self._owner else IntakeRow.owner.is_(None)
            query = query.where(or_(IntakeRow.owner.is_(None), mine, dead))
        rows = await self._db.read(lambda conn: conn.execute(query, params).all())
        return [_entry(row) for row in rows]

    async def expire(self, received_before: datetime) -> int:
        """Open rows received before the cut-off become `expired`; returns how many."""
        statement = (
            update(IntakeRow)
            .where(IntakeRow.state.in_(OPEN_STATES), IntakeRow.received_at < utc(received_before))
            .values(state="expired", updated_at=utcnow())
        )
        return int(await self._db.write(lambda conn: conn.execute(statement).rowcount))

    async def stats(self) -> IntakeStats:
        query = (
            select(IntakeRow.state, func.count(), func.min(IntakeRow.received_at))
            .where(IntakeRow.state.in_(OPEN_STATES))
            .group_by(IntakeRow.state)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        found = {state: (count, oldest) for state, count, oldest in rows}
        pending, oldest = found.get("pending", (0, None))
        answered, _ = found.get("answered", (0, None))
        return IntakeStats(pending=pending, answered=answered, oldest_pending=oldest)

    async def listing(self, state: TurnState | None = None, limit: int = 50) -> list[IntakeEntry]:
        """Newest first, optionally of one state (for `chatterd turns list`)."""
        query = select(*_COLUMNS).order_by(IntakeRow.id.desc()).limit(limit)
        if state is not None:
            query = query.where(IntakeRow.state == state)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [_entry(row) for row in rows]


# Writers a turn-storing transaction can run after its inserts (see SqlStorage.add_turns).
AfterWrite = Callable[[Connection, list[Any]], None]

__all__ = [
    "AfterWrite",
    "IntakeConflict",
    "IntakeDraft",
    "IntakeEntry",
    "IntakeStats",
    "IntakeStore",
    "TurnState",
    "claim_in",
    "settle_in",
]
