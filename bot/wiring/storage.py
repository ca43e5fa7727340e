"""Opening the database for the daemon: migrations in a child process, then the pools,
sized so that every replica fits the server (PostgreSQL's max_connections).

Why apart from app.py: how many connections a replica may hold, and refusing to start
when they cannot fit, is storage policy; the composition root only asks for a store.
"""

from __future__ import annotations

import logging

from bot.config import Settings
from bot.errors import StartupError
from memory.capacity import ConnectionBudget, budget_problem, server_limit
from memory.migrate import Database, upgrade_in_child
from memory.store import SqlStorage, open_storage

log = logging.getLogger(__name__)


async def open_daemon_storage(settings: Settings) -> SqlStorage:
    """Migrate (Alembic stays out of the daemon's process), then open the store."""
    await upgrade_in_child(settings.storage.url)

    async def check(database: Database) -> None:
        await check_connection_budget(settings, database)

    return await open_storage(
        settings.storage.url,
        lock_pool_size=settings.bot.max_in_flight,
        pool_size=settings.storage.pool_size,
        before_migrate=check,
    )


async def check_connection_budget(settings: Settings, database: Database) -> None:
    """PostgreSQL: stop at start (exit 2, one line) when the configured replicas'
    pools cannot fit the server's max_connections (memory/capacity.py)."""
    if database.dialect != "postgresql":
        return
    budget = ConnectionBudget(
        replicas=settings.storage.replicas,
        pool_size=settings.storage.pool_size,
        lock_pool_size=settings.bot.max_in_flight,
    )
    limit = await server_limit(database)
    problem = budget_problem(budget, limit)
    if problem is not None:
        raise StartupError(problem)
    log.info(
        "storage: up to %d connections per replica, %d for %d replica(s) of %d usable",
        budget.per_replica,
        budget.total,
        budget.replicas,
        limit.usable,
    )
