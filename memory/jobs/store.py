"""Durable jobs in the database: add, claim with a lease, renew, checkpoint, finish,
deliver once, cancel, list.

Why a lease and conditional writes: several processes (replicas, or a restarted one)
look at the same queued job; exactly one may run it. A claim is one `UPDATE ... WHERE
id = ? AND (state = 'queued' OR (state = 'running' AND lease_until < now))`, so one wins
on SQLite and PostgreSQL alike. The winner renews its lease while it works; a process
killed mid-way stops renewing, and after the lease another claims the job again (up to
`max_attempts`, resuming from its last `progress` checkpoint). The outcome is stored
before it is sent and `delivered_at` is set right after the send, so an outcome is sent
once (a crash in the instant between the send and that write sends it again).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, func, insert, or_, select, true, update

from memory.db.migrate import Database
from memory.db.records import Records
from memory.db.rows import NAME_LEN, check_key, clean_text, utcnow
from memory.jobs.models import JobRow
from memory.jobs.types import FINISHED, Job, JobDraft, JobRefused

__all__ = ["Job", "JobDraft", "JobRefused", "JobStore"]

_JOBS = Records(JobRow, Job)


class JobStore:
    """The jobs table over a `Database`; each method is one transaction or one read."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, draft: JobDraft, *, max_pending_per_user: int = 0) -> Job:
        """Store a queued job; JobRefused (nothing stored) when its requester already has
        `max_pending_per_user` jobs queued or running (0: no limit)."""
        check_key("job chat", draft.platform, draft.chat_id)
        check_key("job requester", draft.platform, draft.requester_id)
        now = utcnow()
        values = {
            **draft.origin_columns(),
            "requester_id": draft.requester_id,
            "requester_name": clean_text(draft.requester_name)[:NAME_LEN],
            "args": dict(draft.args),
            "state": "queued",
            "attempts": 0,
            "max_attempts": max(1, draft.max_attempts),
            "progress": {},
            "result": {},
            "cost_tokens": 0,
            "created_at": now,
            "updated_at": now,
        }
        pending = select(func.count()).where(
            JobRow.platform == draft.platform,
            JobRow.requester_id == draft.requester_id,
            JobRow.state.in_(("queued", "running")),
        )

        def write(conn: Connection) -> int:
            if max_pending_per_user:
                waiting = int(conn.execute(pending).scalar_one())
                if waiting >= max_pending_per_user:
                    raise JobRefused(waiting, max_pending_per_user)
            return int(
                conn.execute(insert(JobRow).values(**values).returning(JobRow.id)).scalar_one()
            )

        return await _JOBS.written(self._db, await self._db.write(write))

    async def get(self, job_id: int) -> Job | None:
        return await _JOBS.by_id(self._db, job_id)

    async def asked_by(
        self, kind: str, platform: str, chat_id: str, origin_message_id: str
    ) -> Job | None:
        """The job of `kind` a message already asked for (the newest), if any: a turn run
        again after a crash finds the job its first run stored instead of adding another."""
        query = (
            _JOBS.select()
            .where(
                JobRow.kind == kind,
                JobRow.platform == platform,
                JobRow.chat_id == chat_id,
                JobRow.origin_message_id == origin_message_id,
            )
            .order_by(JobRow.id.desc())
            .limit(1)
        )
        found = await _JOBS.all(self._db, query)
        return found[0] if found else None

    async def listing(
        self, platform: str, chat_id: str, *, requester_id: str | None = None, limit: int = 20
    ) -> list[Job]:
        """A chat's jobs, newest first (only one requester's when named)."""
        where = [JobRow.platform == platform, JobRow.chat_id == chat_id]
        if requester_id is not None:
            where.append(JobRow.requester_id == requester_id)
        query = _JOBS.select().where(*where).order_by(JobRow.id.desc()).limit(limit)
        return await _JOBS.all(self._db, query)

    async def count_since(
        self,
        kind: str,
        platform: str,
        since: datetime,
        *,
        requester_id: str | None = None,
        chat_id: str | None = None,
    ) -> int:
        """Jobs of `kind` asked for since `since` by one requester or in one chat, that did
        not fail or get cancelled: a daily quota counts the waiting ones too, so two
        requests at once cannot both pass the last place."""
        where = [
            JobRow.kind == kind,
            JobRow.platform == platform,
            JobRow.created_at >= since,
            JobRow.state.not_in(("failed", "cancelled")),
        ]
        if requester_id is not None:
            where.append(JobRow.requester_id == requester_id)
        if chat_id is not None:
            where.append(JobRow.chat_id == chat_id)
        query = select(func.count()).where(*where)
        return int(await self._db.read(lambda conn: conn.execute(query).scalar_one()))

    async def recent(self, *, state: str | None = None, limit: int = 50) -> list[Job]:
        """Every chat's jobs, newest first (the CLI and the console)."""
        query = _JOBS.select().order_by(JobRow.id.desc()).limit(limit)
        if state is not None:
            query = query.where(JobRow.state == state)
        return await _JOBS.all(self._db, query)

    async def claim(
        self,
        worker: str,
        now: datetime,
        lease_s: float,
        kinds: Sequence[str],
        skip: Sequence[int] = (),
        live: Collection[str] | None = None,
    ) -> Job | None:
        """The oldest job of `kinds` that is queued, or whose runner is gone, now running
        under `worker`'s lease; None when there is none (or another won it). A runner is
        gone when its lease ran out, or at once when `live` (the workers known to be
        alive; None: not known) does not name it. `skip`: the jobs this worker runs now
        (its own lease may have run out in a stall: it must not start a second handler
        for one of them)."""
        claimable = and_(
            JobRow.kind.in_(tuple(kinds)),
            JobRow.id.not_in(tuple(skip)) if skip else true(),
            or_(JobRow.state == "queued", and_(JobRow.state == "running", _gone(now, live))),
        )
        oldest = select(JobRow.id).where(claimable).order_by(JobRow.id).limit(1)
        lease = now + timedelta(seconds=lease_s)

        def write(conn: Connection) -> int | None:
            found = conn.execute(oldest).scalar_one_or_none()
            if found is None:
                return None
            claimed = conn.execute(
                update(JobRow)
                .where(JobRow.id == found, claimable)
                .values(
                    state="running",
                    claimed_by=worker,
                    lease_until=lease,
                    attempts=JobRow.attempts + 1,
                    updated_at=now,
                )
            )
            return int(found) if claimed.rowcount == 1 else None

        job_id = await self._db.write(write)
        return None if job_id is None else await self.get(job_id)

    async def renew(self, job: Job, worker: str, now: datetime, lease_s: float) -> bool:
        """Extend the lease; False when the job is no longer this worker's (taken over
        after a stall, or cancelled): the worker must stop."""
        lease = now + timedelta(seconds=lease_s)
        return await self._mine(job.id, worker, lease_until=lease, updated_at=now)

    async def checkpoint(self, job: Job, worker: str, progress: dict[str, Any]) -> bool:
        """Store how far the job got, so a claim after a crash resumes from here."""
        return await self._mine(job.id, worker, progress=dict(progress), updated_at=utcnow())

    async def release(self, job: Job, worker: str, *, refund: bool = False) -> bool:
        """Let go of a job so it is claimed (tried) again: after a failed attempt, or with
        `refund` when the runner stops on purpose (that attempt does not count)."""
        attempts = JobRow.attempts - 1 if refund else JobRow.attempts
        return await self._mine(
            job.id,
            worker,
            state="queued",
            claimed_by=None,
            lease_until=None,
            attempts=attempts,
            updated_at=utcnow(),
        )

    async def finish(
        self,
        job: Job,
        worker: str,
        state: str,
        outcome: str,
        *,
        result: dict[str, Any] | None = None,
        cost_tokens: int = 0,
        hold_s: float = 0.0,
    ) -> bool:
        """The job's end, stored before anything is sent; False when it was not this
        worker's any more (cancelled, or taken over). With `hold_s` the worker keeps its
        claim on sending the outcome that long (`take_delivery`: no other replica sends
        it meanwhile)."""
        assert state in FINISHED
        now = utcnow()
        return await self._mine(
            job.id,
            worker,
            state=state,
            outcome=outcome,
            result=dict(result or {}),
            cost_tokens=cost_tokens,
            lease_until=now + timedelta(seconds=hold_s) if hold_s else None,
            finished_at=now,
            updated_at=now,
        )

    async def give_up(self, job: Job, now: datetime, outcome: str) -> bool:
        """A job whose attempts are spent: failed with `outcome`, whoever claimed it."""
        where = and_(JobRow.id == job.id, JobRow.state.in_(("queued", "running")))
        values = {"state": "failed", "outcome": outcome, "lease_until": None}
        return await self._update(where, finished_at=now, updated_at=now, **values)

    async def spent(
        self, now: datetime, limit: int = 20, live: Collection[str] | None = None
    ) -> list[Job]:
        """Jobs whose runner died on the last allowed attempt (gone, none left)."""
        query = (
            _JOBS.select()
            .where(
                JobRow.state == "running",
                _gone(now, live),
                JobRow.attempts >= JobRow.max_attempts,
            )
            .order_by(JobRow.id)
            .limit(limit)
        )
        return await _JOBS.all(self._db, query)

    async def undelivered(self, limit: int = 20) -> list[Job]:
        """Finished jobs whose outcome has not gone out (their process died first)."""
        query = (
            _JOBS.select()
            .where(
                JobRow.state.in_(FINISHED),
                JobRow.outcome.is_not(None),
                JobRow.delivered_at.is_(None),
            )
            .order_by(JobRow.id)
            .limit(limit)
        )
        return await _JOBS.all(self._db, query)

    async def take_delivery(
        self,
        job: Job,
        worker: str,
        now: datetime,
        lease_s: float,
        live: Collection[str] | None = None,
    ) -> bool:
        """Claim sending a finished job's unsent outcome (one process sends it, not every
        replica): free when nobody holds it, its holder is gone, or it is ours."""
        where = and_(
            JobRow.id == job.id,
            JobRow.state.in_(FINISHED),
            JobRow.delivered_at.is_(None),
            or_(JobRow.lease_until.is_(None), _gone(now, live), JobRow.claimed_by == worker),
        )
        lease = now + timedelta(seconds=lease_s)
        return await self._update(where, claimed_by=worker, lease_until=lease)

    async def delivered(
        self, job: Job, now: datetime, *, result: dict[str, Any] | None = None
    ) -> bool:
        """Mark the outcome sent; False when it already was (by another process). With
        `result`, it replaces the stored one and the progress is emptied: what was kept
        only to send it again (a picture) is not carried in every later read."""
        where = and_(JobRow.id == job.id, JobRow.delivered_at.is_(None))
        if result is None:
            return await self._update(where, delivered_at=now)
        return await self._update(where, delivered_at=now, result=dict(result), progress={})

    async def cancel(self, job: Job, by: str, now: datetime) -> bool:
        """Cancel a job that has not ended; its runner sees that at its next renewal."""
        where = and_(JobRow.id == job.id, JobRow.state.in_(("queued", "running")))
        outcome = f"Job #{job.id} was cancelled by {by}."
        return await self._update(
            where,
            state="cancelled",
            outcome=outcome,
            lease_until=None,
            finished_at=now,
            updated_at=now,
            delivered_at=now,  # the canceller is told in their command's answer
        )

    async def _mine(self, job_id: int, worker: str, **values: Any) -> bool:
        where = and_(JobRow.id == job_id, JobRow.state == "running", JobRow.claimed_by == worker)
        return await self._update(where, **values)

    async def _update(self, where: Any, **values: Any) -> bool:
        statement = update(JobRow).where(where).values(**values)
        return await self._db.write(lambda conn: conn.execute(statement).rowcount == 1)


def _gone(now: datetime, live: Collection[str] | None) -> ColumnElement[bool]:
    """The row's claimer is gone: its lease ran out, or it is known not to be alive."""
    expired = JobRow.lease_until < now
    if live is None:
        return expired
    return or_(expired, JobRow.claimed_by.is_(None), JobRow.claimed_by.not_in(tuple(live)))
