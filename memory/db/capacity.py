"""Will this many daemons fit the PostgreSQL server's connection limit?

Why: each daemon opens up to `pool_size` connections, however many turns it has in
flight (a turn holds one only for each short transaction; chat order is a lease row,
memory/leases/store.py). Replicas whose pools together exceed the server's
max_connections get connections refused at random points of random turns, and messages
are left half-done: accepted but never answered, or answered and sent again. Checking at
start turns that into one line and exit status 2 before anything is accepted.

The check does not trust `[storage] replicas` alone: each daemon names its sessions
`chatterd/<schema>/<replica>` (memory/db/migrate.py), so a starting replica counts the
others already using the database and budgets for at least that many.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from memory.db.migrate import Database, application_name

_LIMITS = text(
    "SELECT current_setting('max_connections')::int, "
    "current_setting('superuser_reserved_connections')::int, "
    "coalesce(current_setting('reserved_connections', true), '0')::int"
)


@dataclass(frozen=True)
class ConnectionBudget:
    """What the replicas will open at most, per the configuration."""

    replicas: int
    pool_size: int  # [storage] pool_size: every connection a replica opens

    @property
    def per_replica(self) -> int:
        return self.pool_size

    @property
    def total(self) -> int:
        return self.replicas * self.per_replica


@dataclass(frozen=True)
class ServerLimit:
    max_connections: int
    reserved: int  # for superusers (and pg_use_reserved_connections on 16+)

    @property
    def usable(self) -> int:
        return max(0, self.max_connections - self.reserved)


async def server_limit(database: Database) -> ServerLimit:
    """The server's max_connections and the slots reserved out of it."""
    row = await database.read(lambda conn: conn.execute(_LIMITS).one())
    return ServerLimit(max_connections=int(row[0]), reserved=int(row[1]) + int(row[2]))


_OTHERS = text(
    "SELECT count(DISTINCT application_name) FROM pg_stat_activity "
    "WHERE application_name LIKE :prefix AND application_name <> :own"
)


async def other_replicas(database: Database) -> int:
    """How many other daemons use this database (and schema) now, by their sessions."""
    target = database.target
    prefix = application_name(target).replace("%", r"\%").replace("_", r"\_") + "/%"
    own = application_name(target, database.replica)
    query = _OTHERS.bindparams(prefix=prefix, own=own)
    return int(await database.read(lambda conn: conn.execute(query).scalar_one()))


_LIVE = text(
    "SELECT DISTINCT application_name FROM pg_stat_activity WHERE application_name LIKE :prefix"
)


_BEATING = text(
    "SELECT substr(name, length('replica:') + 1) FROM leases "
    "WHERE name LIKE 'replica:%' AND lease_until > now()"
)


async def live_replicas(database: Database) -> frozenset[str]:
    """The replica ids of the daemons that have a session on this database now (this one's
    too): a claim held by any other replica is a dead process's. Behind PgBouncer the
    server's sessions do not say whose they are: there a replica lives while it keeps
    its `replica:` lease renewed (memory/leases/store.py)."""
    if database.target.pgbouncer:
        beating = await database.read(lambda conn: conn.execute(_BEATING).scalars().all())
        return frozenset({*map(str, beating), *([database.replica] if database.replica else [])})
    head = application_name(database.target, "-")[:-1]  # "chatterd/<schema>/"
    prefix = head.replace("%", r"\%").replace("_", r"\_") + "%"
    query = _LIVE.bindparams(prefix=prefix)
    names = await database.read(lambda conn: conn.execute(query).scalars().all())
    live = {str(name)[len(head) :] for name in names}
    if database.replica:
        live.add(database.replica)
    return frozenset(live)


def budget_problem(budget: ConnectionBudget, limit: ServerLimit, others: int = 0) -> str | None:
    """One line naming the keys when the budget does not fit, else None. `others`: the
    replicas already running, which may be more than `[storage] replicas` says."""
    seen = others + 1
    if seen > budget.replicas:
        budget = ConnectionBudget(seen, budget.pool_size)
    if budget.total <= limit.usable:
        return None
    running = f" ({others} other replica(s) already use this database)" if others else ""
    return (
        f"storage: {budget.replicas} replica(s){running} x {budget.per_replica} connections "
        f"([storage] pool_size) = {budget.total} do not fit PostgreSQL max_connections "
        f"{limit.max_connections} ({limit.usable} after {limit.reserved} reserved); lower "
        f"[storage] pool_size, or raise max_connections"
    )
