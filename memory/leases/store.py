"""Named leases in the database: what orders one chat's turns (and one reminder's send)
across replicas without holding a connection while the work runs.

Why a row and not a PostgreSQL advisory lock: a session lock lives on one connection, so
each turn waiting for the model held a connection, a replica's connections grew with its
turns in flight, and PgBouncer in transaction mode cannot carry it. A lease is taken,
renewed and given back in short transactions of their own; between them the holder holds
no connection at all.

A lease is free when nobody holds it, when its time ran out (the holder stopped renewing),
or at once when its holder is known to be dead: a replica whose sessions are gone from
pg_stat_activity (the same liveness rule as the job runner's, memory/db/capacity.py).
Behind PgBouncer sessions do not tell which replica is alive, so there each replica keeps
a `replica:<id>` lease of its own renewed, and a holder without one is dead. A process
without a replica name (the CLI, library use) is held to its lease's time alone.
On SQLite one process owns the database and the processor orders its chats itself: a
lease is always granted and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import Connection, TextClause, text

from memory.db.migrate import Database, application_name

log = logging.getLogger(__name__)

LEASE_S = 30.0  # how long a lease outlives its holder's last renewal (the fallback)
FIRST_WAIT_S = 0.02  # a waiter asks again after this, doubling up to MAX_WAIT_S
MAX_WAIT_S = 0.5
BEAT_PREFIX = "replica:"
ANONYMOUS = "~"  # holders without a replica name start with it: only time frees theirs


def _liveness(pgbouncer: bool) -> str:
    """SQL that is true when the holder named in COLUMN (replaced by the caller) is alive."""
    if pgbouncer:
        return (
            "(COLUMN LIKE '~%' OR EXISTS (SELECT 1 FROM leases beat WHERE beat.name = "
            f"'{BEAT_PREFIX}' || COLUMN AND beat.lease_until > now()))"
        )
    return (
        "(COLUMN LIKE '~%' OR EXISTS (SELECT 1 FROM pg_stat_activity "
        "WHERE application_name = :sessions || COLUMN))"
    )


class LeaseStore:
    """Take, renew and give back named leases as one holder (this replica)."""

    def __init__(self, database: Database, *, lease_s: float = LEASE_S) -> None:
        self._db = database
        self._lease_s = lease_s
        self.holder = database.replica or f"{ANONYMOUS}{uuid.uuid4().hex[:12]}"
        self._held: set[str] = set()
        self._keeper: asyncio.Task[None] | None = None
        pgbouncer = database.target.pgbouncer
        self._beats = pgbouncer and database.replica is not None
        self._params: dict[str, object] = {
            "holder": self.holder,
            "lease_s": lease_s,
            "sessions": application_name(database.target, "-")[:-1],
        }
        alive = _liveness(pgbouncer).replace("COLUMN", "leases.holder")
        self._take = text(
            "INSERT INTO leases (name, holder, lease_until) "
            "VALUES (:name, :holder, now() + make_interval(secs => :lease_s)) "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
            "lease_until = EXCLUDED.lease_until "
            f"WHERE leases.lease_until < now() OR NOT {alive} RETURNING holder"
        )
        self._renew = text(
            "UPDATE leases SET lease_until = now() + make_interval(secs => :lease_s) "
            "WHERE holder = :holder AND name = ANY(:names)"
        )
        self._give_back = text("DELETE FROM leases WHERE name = :name AND holder = :holder")
        self._beat = text(
            "INSERT INTO leases (name, holder, lease_until) "
            "VALUES (:name, :holder, now() + make_interval(secs => :lease_s)) "
            "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
            "lease_until = EXCLUDED.lease_until"
        )

    @property
    def enabled(self) -> bool:
        return self._db.dialect == "postgresql"

    def dead_sql(self, column: str) -> tuple[TextClause, dict[str, object]]:
        """A condition true when the holder named in `column` is known to be dead, and
        its bind parameters (the intake's `owner` is judged by it: memory/turns/intake.py)."""
        clause = _liveness(self._db.target.pgbouncer).replace("COLUMN", column)
        params = {} if self._db.target.pgbouncer else {"sessions": self._params["sessions"]}
        return text(f"NOT {clause}"), params

    async def take(self, name: str) -> bool:
        """The lease `name` for this holder if it is free now; False at once if not."""
        if not self.enabled:
            return True
        params = {**self._params, "name": name}
        if self._db.target.pgbouncer:
            del params["sessions"]
        taken = await self._db.write(lambda conn: conn.execute(self._take, params).first())
        if taken is None:
            return False
        self._held.add(name)
        self._keep()
        return True

    async def give_back(self, name: str) -> None:
        """Let go of `name` (a no-op unless this holder has it)."""
        if not self.enabled:
            return
        self._held.discard(name)
        params = {"name": name, "holder": self.holder}
        await self._db.write(lambda conn: conn.execute(self._give_back, params))

    @asynccontextmanager
    async def hold(self, name: str, *, wait: bool = True) -> AsyncIterator[bool]:
        """Hold `name` for the block: True while held; with `wait=False` False at once
        (holding nothing) when another holder has it. Waiting polls, since no session
        stays open to be woken on; a replica only waits for another replica's turn."""
        delay = FIRST_WAIT_S
        while not await self.take(name):
            if not wait:
                yield False
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_WAIT_S)
        try:
            yield True
        finally:
            try:
                await asyncio.shield(self.give_back(name))
            except Exception as exc:  # the lease runs out on its own: nothing renews it
                log.warning("lease %s not given back: %s", name, type(exc).__name__)

    def start(self) -> None:
        """Keep this replica's leases (and, behind PgBouncer, its own `replica:` lease)
        renewed from now until close()."""
        if self._beats:
            self._held.add(BEAT_PREFIX + self.holder)
        self._keep()

    def _keep(self) -> None:
        if self.enabled and (self._keeper is None or self._keeper.done()):
            self._keeper = asyncio.get_running_loop().create_task(self._keep_renewing())

    async def _keep_renewing(self) -> None:
        """Renew every lease held, a third of a lease apart, so one slow round never lets
        a lease run out; one UPDATE for all of them."""
        while True:
            try:
                if self._beats:
                    await self._beat_once()
                if self._held:
                    await self._renew_held()
            except Exception as exc:  # a brief outage: the next round tries again
                log.warning("renewing leases failed: %s", type(exc).__name__)
            await asyncio.sleep(self._lease_s / 3)

    async def _beat_once(self) -> None:
        params = {
            "name": BEAT_PREFIX + self.holder,
            "holder": self.holder,
            "lease_s": self._lease_s,
        }
        await self._db.write(lambda conn: conn.execute(self._beat, params))

    async def _renew_held(self) -> None:
        params = {"holder": self.holder, "lease_s": self._lease_s, "names": sorted(self._held)}

        def write(conn: Connection) -> None:
            conn.execute(self._renew, params)

        await self._db.write(write)

    async def close(self) -> None:
        """Stop renewing and give the held leases back."""
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
            self._keeper = None
        for name in sorted(self._held):
            with contextlib.suppress(Exception):
                await self.give_back(name)
