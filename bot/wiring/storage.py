"""Opening the database for the daemon: migrations in a child process, then the pools,
sized so that every replica fits the server (PostgreSQL's max_connections).

How many connections a replica may hold, and refusing to start when they cannot fit, is
storage policy.
"""

from __future__ import annotations

import logging
import uuid

from bot.config import Settings
from bot.errors import StartupError
from memory.db.capacity import ConnectionBudget, budget_problem, other_replicas, server_limit
from memory.db.migrate import Database, upgrade_in_child
from memory.turns.store import SqlStorage, open_storage

log = logging.getLogger(__name__)


async def open_daemon_storage(settings: Settings) -> SqlStorage:
    """Migrate (Alembic stays out of the daemon's process), then open the store."""
    await upgrade_in_child(settings.storage.url)

    async def check(database: Database) -> None:
        await check_connection_budget(settings, database)

    return await open_storage(
        settings.storage.url,
        pool_size=settings.storage.pool_size,
        before_migrate=check,
        replica=uuid.uuid4().hex[:12],  # how the other replicas see this one
    )


async def check_connection_budget(settings: Settings, database: Database) -> None:
    """PostgreSQL: stop at start (exit 2, one line) when the replicas' pools cannot fit
    the server's max_connections: as many as `[storage] replicas` says, or as many as are
    already running plus this one, whichever is more (memory/db/capacity.py)."""
    if database.dialect != "postgresql":
        return
    if database.target.pgbouncer:  # PgBouncer's own pool is what reaches the server
        log.info("storage: behind PgBouncer; its pool size bounds the server connections")
        return
    budget = ConnectionBudget(
        replicas=settings.storage.replicas,
        pool_size=settings.storage.pool_size,
    )
    limit = await server_limit(database)
    others = await other_replicas(database)
    problem = budget_problem(budget, limit, others)
    if problem is not None:
        raise StartupError(problem)
    replicas = max(budget.replicas, others + 1)
    log.info(
        "storage: up to %d connections per replica, %d for %d replica(s) of %d usable "
        "(%d other replica(s) running now)",
        budget.per_replica,
        replicas * budget.per_replica,
        replicas,
        limit.usable,
        others,
    )
