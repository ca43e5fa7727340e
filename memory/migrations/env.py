"""Alembic environment for chatterd.

chatterd runs migrations itself (memory/db/migrate.py) and hands Alembic an open
connection through `config.attributes["connection"]`. When Alembic is driven from its
own command line instead, the URL comes from `sqlalchemy.url` and the database is
opened here with the same settings chatterd uses (PostgreSQL: the async engine through
`run_sync`; SQLite: its migration engine with transactional DDL).
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from memory.db.migrate import Database, parse_url
from memory.schema import Base, described_by_models

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite alters tables by copying them; later migrations need batch mode there.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=described_by_models,
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_database(url: str) -> None:
    database = Database(parse_url(url), pool_size=1)
    try:
        await database.migrate(_run)
    finally:
        await database.close()


def run_offline() -> None:
    """`alembic upgrade --sql`: print the SQL instead of running it."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection given and no sqlalchemy.url configured")
    asyncio.run(_run_with_own_database(url))


if context.is_offline_mode():
    run_offline()
else:
    run_online()
