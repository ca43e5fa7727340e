"""Reminders and their occurrences in the database: set, list, cancel, claim, finish.

Why claims are conditional writes: with several replicas (or a restarted process and
its own recovery) looking at the same due reminder, exactly one may send it. Claiming is
one transaction: `UPDATE reminders SET next_due_at = <the next one> WHERE id = ? AND
state = 'active' AND next_due_at = <this one>` (one winner, on SQLite and PostgreSQL)
and the INSERT of the occurrence's `reminder_runs` row, unique on (reminder, due time).
The winner sends and then finishes the run; a run still `claimed` after its claimer
died is recovery's (core/reminders/scheduler.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, func, insert, select, update

from memory.chats.types import person_key
from memory.db.migrate import Database
from memory.db.records import Records
from memory.db.rows import NAME_LEN, check_key, clean_text, refuse_over, utcnow
from memory.reminders.models import ReminderRow, ReminderRunRow
from memory.reminders.types import Reminder, ReminderDraft, ReminderOverLimit, Run

__all__ = ["Reminder", "ReminderDraft", "ReminderOverLimit", "ReminderStore", "Run"]

TEXT_MAX_CHARS = 1000


_REMINDERS = Records(ReminderRow, Reminder)
_RUNS = Records(ReminderRunRow, Run)


class ReminderStore:
    """The reminders tables over a `Database`; each method is one transaction or read."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, draft: ReminderDraft, *, max_per_user: int, max_per_chat: int) -> Reminder:
        """Store an active reminder; ReminderOverLimit (nothing stored) over a limit."""
        check_key("reminder chat", draft.platform, draft.chat_id)
        check_key("reminder owner", draft.platform, draft.owner_id)
        text = clean_text(draft.text.strip())
        if not text:
            raise ValueError("reminder: the text is empty")
        if len(text) > TEXT_MAX_CHARS:
            raise ReminderOverLimit("text", TEXT_MAX_CHARS)
        now = utcnow()
        values = {
            **draft.origin_columns(),
            "owner_id": draft.owner_id,
            "owner_name": clean_text(draft.owner_name)[:NAME_LEN],
            "text": text,
            "rule": draft.rule,
            "zone": draft.zone,
            "state": "active",
            "next_due_at": draft.first_due,
            "created_at": now,
            "updated_at": now,
            "updated_by": person_key(draft.platform, draft.owner_id)[:200],
        }
        active = ReminderRow.state == "active"
        mine = select(func.count()).where(
            active, ReminderRow.platform == draft.platform, ReminderRow.owner_id == draft.owner_id
        )
        here = select(func.count()).where(
            active, ReminderRow.platform == draft.platform, ReminderRow.chat_id == draft.chat_id
        )

        def write(conn: Connection) -> int:
            refuse_over(conn, mine, ReminderOverLimit("person", max_per_user))
            refuse_over(conn, here, ReminderOverLimit("chat", max_per_chat))
            found = conn.execute(insert(ReminderRow).values(**values).returning(ReminderRow.id))
            return int(found.scalar_one())

        return await _REMINDERS.written(self._db, await self._db.write(write))

    async def get(self, reminder_id: int) -> Reminder | None:
        return await _REMINDERS.by_id(self._db, reminder_id)

    async def listing(
        self,
        *,
        platform: str | None = None,
        chat_id: str | None = None,
        owner_id: str | None = None,
        states: Sequence[str] = ("active", "missed"),
        limit: int = 100,
    ) -> list[Reminder]:
        """Reminders in these states, oldest first, narrowed to a chat and/or an owner."""
        query = _REMINDERS.select().where(ReminderRow.state.in_(list(states)))
        if platform is not None:
            query = query.where(ReminderRow.platform == platform)
        if chat_id is not None:
            query = query.where(ReminderRow.chat_id == chat_id)
        if owner_id is not None:
            query = query.where(ReminderRow.owner_id == owner_id)
        query = query.order_by(ReminderRow.id).limit(limit)
        return await _REMINDERS.all(self._db, query)

    async def cancel(self, reminder_id: int, *, by: str) -> bool:
        """An active (or missed) reminder becomes `cancelled`; False when it was not."""
        statement = (
            update(ReminderRow)
            .where(ReminderRow.id == reminder_id, ReminderRow.state.in_(["active", "missed"]))
            .values(state="cancelled", next_due_at=None, updated_at=utcnow(), updated_by=by[:200])
        )
        done = await self._db.write(lambda conn: conn.execute(statement).rowcount)
        return bool(done == 1)

    async def due(self, now: datetime, limit: int = 100) -> list[Reminder]:
        """Active reminders whose next occurrence is due, the earliest first."""
        query = (
            _REMINDERS.select()
            .where(ReminderRow.state == "active", ReminderRow.next_due_at <= now)
            .order_by(ReminderRow.next_due_at, ReminderRow.id)
            .limit(limit)
        )
        return await _REMINDERS.all(self._db, query)

    async def next_due(self) -> datetime | None:
        """The earliest occurrence still to come (the scheduler sleeps until it)."""
        query = select(func.min(ReminderRow.next_due_at)).where(ReminderRow.state == "active")
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    async def claim(
        self,
        reminder: Reminder,
        *,
        due: datetime,
        next_due: datetime | None,
        run_state: str,
        skipped: int,
        by: str,
        now: datetime | None = None,
    ) -> Run | None:
        """Take occurrence `due` of `reminder` (whose stored next_due_at the caller read)
        and move the reminder on to `next_due` (None: finished). Exactly one caller gets
        the Run; everyone else gets None. `run_state` is `claimed` (to be sent) or
        `missed` (too old, recorded only)."""
        assert reminder.next_due_at is not None
        now = now or utcnow()
        if next_due is not None:
            state = "active"
        else:
            state = "missed" if run_state == "missed" else "done"
        move = (
            update(ReminderRow)
            .where(
                ReminderRow.id == reminder.id,
                ReminderRow.state == "active",
                ReminderRow.next_due_at == reminder.next_due_at,
            )
            .values(
                next_due_at=next_due,
                state=state,
                last_due_at=due,
                last_outcome=run_state,
                updated_at=now,
            )
        )
        values = {
            "reminder_id": reminder.id,
            "due_at": due,
            "state": run_state,
            "skipped": skipped,
            "claimed_by": by[:64],
            "claimed_at": now,
            "finished_at": now if run_state != "claimed" else None,
            "detail": "",
        }

        def write(conn: Connection) -> int | None:
            if conn.execute(move).rowcount != 1:
                return None
            found = conn.execute(
                insert(ReminderRunRow).values(**values).returning(ReminderRunRow.id)
            )
            return int(found.scalar_one())

        run_id = await self._db.write(write)
        if run_id is None:
            return None
        return Run(run_id, reminder.id, due, run_state, skipped, by, now)

    async def finish(self, run: Run, state: str, detail: str = "") -> bool:
        """A claimed run is settled (delivered, late, failed, skipped); False when it was
        settled already (by recovery elsewhere)."""
        now = utcnow()
        settle = (
            update(ReminderRunRow)
            .where(ReminderRunRow.id == run.id, ReminderRunRow.state == "claimed")
            .values(state=state, finished_at=now, detail=detail[:500])
        )
        note = (
            update(ReminderRow)
            .where(ReminderRow.id == run.reminder_id, ReminderRow.last_due_at == run.due_at)
            .values(last_outcome=state)
        )

        def write(conn: Connection) -> bool:
            if conn.execute(settle).rowcount != 1:
                return False
            conn.execute(note)
            return True

        return await self._db.write(write)

    async def open_runs(self, limit: int = 100) -> list[Run]:
        """Runs claimed but not finished, oldest first (a live send, or a dead one's)."""
        query = (
            _RUNS.select()
            .where(ReminderRunRow.state == "claimed")
            .order_by(ReminderRunRow.id)
            .limit(limit)
        )
        return await _RUNS.all(self._db, query)

    async def runs_of(self, reminder_id: int) -> list[Run]:
        query = (
            _RUNS.select()
            .where(ReminderRunRow.reminder_id == reminder_id)
            .order_by(ReminderRunRow.id)
        )
        return await _RUNS.all(self._db, query)

    async def missed_count(self, reminder_id: int) -> int:
        query = select(func.count()).where(
            ReminderRunRow.reminder_id == reminder_id, ReminderRunRow.state == "missed"
        )
        return int(await self._db.read(lambda conn: conn.execute(query).scalar_one()))


__all__ = [
    "TEXT_MAX_CHARS",
    "Reminder",
    "ReminderDraft",
    "ReminderOverLimit",
    "ReminderStore",
    "Run",
]
