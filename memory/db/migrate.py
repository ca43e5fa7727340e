"""Reaching the database the way chatterd needs it, and bringing its schema to head.

`Database` runs plain functions of a SQLAlchemy `Connection`, one transaction each:
- PostgreSQL: through the asyncpg async engine (`run_sync`), so the loop never blocks;
- SQLite: on the sqlite3 driver in worker threads, one thread hop per transaction (not
  one per cursor, execute, fetch and commit). One write thread serialises this process's
  writes, so chats never race for SQLite's write lock; WAL lets the read threads run
  beside it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlalchemy import Engine, event, inspect, text
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

T = TypeVar("T")
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
# Any fixed number: replicas starting together take turns running the migrations.
MIGRATION_LOCK_KEY = 0x63_68_61_74_74_65_72  # "chatter"
SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_READ_THREADS = 4
# sqlite:// and sqlite+aiosqlite:// (the older spelling) both mean a file run on sqlite3.
ACCEPTED_DRIVERS = frozenset({"sqlite", "sqlite+aiosqlite", "postgresql+asyncpg"})
# URL query options chatterd reads itself: the PostgreSQL schema to work in, and whether
# the URL names PgBouncer in transaction pooling mode (see _postgres_engine).
SEARCH_PATH_OPTION = "search_path"
PGBOUNCER_OPTION = "pgbouncer"
# How each SQLite engine runs its transactions (see _sqlite_engine).
SqliteRole = Literal["migrate", "write", "read"]


@dataclass(frozen=True)
class Target:
    """A parsed storage URL: the driver URL proper plus chatterd's own options."""

    url: URL
    search_path: str | None
    pgbouncer: bool = False

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"


def parse_url(url: str) -> Target:
    """Split chatterd's options off a storage URL and reject what cannot work.

    A SQLite URL comes back as plain `sqlite://` (the sqlite3 driver runs it either way).
    """
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy's message repeats the URL, password included
        raise ValueError("storage url is not a valid database URL") from exc
    backend = parsed.get_backend_name()
    if parsed.drivername not in ACCEPTED_DRIVERS:
        raise ValueError(
            "storage url must start with sqlite://, sqlite+aiosqlite:// or postgresql+asyncpg://"
        )
    search_path = parsed.query.get(SEARCH_PATH_OPTION)
    if isinstance(search_path, tuple):
        raise ValueError(f"storage url: give {SEARCH_PATH_OPTION} once")
    if search_path is not None:
        if backend != "postgresql":
            raise ValueError(f"storage url: {SEARCH_PATH_OPTION} is for PostgreSQL only")
        parsed = parsed.difference_update_query([SEARCH_PATH_OPTION])
    pgbouncer = parsed.query.get(PGBOUNCER_OPTION)
    if pgbouncer is not None:
        if backend != "postgresql" or pgbouncer not in ("true", "false"):
            raise ValueError(f"storage url: {PGBOUNCER_OPTION} is true or false, PostgreSQL only")
        if pgbouncer == "true" and search_path is not None:
            raise ValueError(
                f"storage url: PgBouncer does not pass {SEARCH_PATH_OPTION} on; set the "
                "schema on its side (connect_query, or the role's search_path)"
            )
        parsed = parsed.difference_update_query([PGBOUNCER_OPTION])
    if backend == "sqlite":
        database = parsed.database or ""
        if not database or ":memory:" in database or parsed.query.get("mode") == "memory":
            raise ValueError(
                "storage url: an in-memory SQLite database cannot be shared between "
                "connections; give a file path such as sqlite:///data/chatterd.sqlite"
            )
        parsed = parsed.set(drivername="sqlite")  # run on sqlite3 whichever form was given
    return Target(parsed, search_path, pgbouncer == "true")


def _sqlite_engine(target: Target, role: SqliteRole, pool_size: int) -> Engine:
    """A sqlite3-driver engine on the file `target` names, set up for one job.

    A deferred transaction that reads and then writes fails at once with "database is
    locked" when another connection wrote meanwhile; BEGIN IMMEDIATE takes the write lock
    up front, where busy_timeout applies (think daemon plus `chatterd memory` CLI).
    - "migrate": SQLAlchemy emits BEGIN IMMEDIATE, so DDL is transactional too;
    - "write": sqlite3 emits BEGIN IMMEDIATE itself before the first INSERT/UPDATE/DELETE
      (the store's writes never read before they write, so that is enough);
    - "read": autocommit, each SELECT its own snapshot, no BEGIN or ROLLBACK at all.
    """
    if target.url.query.get("uri") not in ("true", "1"):  # "file:" URIs are the caller's
        Path(target.url.database or "").expanduser().resolve().parent.mkdir(
            parents=True, exist_ok=True
        )
    options: dict[str, Any] = {"pool_size": pool_size, "max_overflow": 0}
    if role == "read":
        options["skip_autocommit_rollback"] = True
    elif role == "write":
        options["pool_reset_on_return"] = None  # every use ends in COMMIT or ROLLBACK
    engine = create_sync_engine(
        target.url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        **options,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = "IMMEDIATE" if role == "write" else None
        if role != "read":
            dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")  # durable enough with WAL
        dbapi_connection.execute("PRAGMA foreign_keys=ON")
        dbapi_connection.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")

    if role == "migrate":

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def application_name(target: Target, replica: str | None = None) -> str:
    """How our sessions are named in pg_stat_activity: `chatterd/<schema>`, and a daemon's
    `chatterd/<schema>/<replica>`, so each replica can count the others (capacity.py)
    and an operator (or a fault test) can find them."""
    base = f"chatterd/{target.search_path or 'public'}"
    return f"{base[:50]}/{replica}" if replica else base[:63]


def _unique_statement_name() -> str:
    return f"__chatterd_{uuid.uuid4().hex}__"


def _postgres_engine(
    target: Target, pool_size: int, max_overflow: int, replica: str | None = None, **options: Any
) -> AsyncEngine:
    settings = {"application_name": application_name(target, replica)}
    if target.search_path:
        settings["search_path"] = target.search_path
    connect_args: dict[str, Any] = {"server_settings": settings}
    if target.pgbouncer:
        # A transaction may run on any server connection: no statement prepared on one
        # is reused (both caches off), and the few asyncpg must prepare get names no
        # other client's connection can already hold.
        connect_args["statement_cache_size"] = 0
        connect_args["prepared_statement_cache_size"] = 0
        connect_args["prepared_statement_name_func"] = _unique_statement_name
    return create_async_engine(
        target.url,
        connect_args=connect_args,
        pool_size=pool_size,
        max_overflow=max_overflow,
        pool_pre_ping=True,
        **options,
    )


class Database:
    """Runs `fn(connection)` in a transaction on SQLite or PostgreSQL, never blocking the loop.

    Nothing outlives a transaction on a connection (no session locks, no session
    settings beyond the ones given at connect), so PgBouncer's transaction mode can
    carry it; what must outlast a transaction is a row (memory/leases/store.py).
    """

    def __init__(
        self,
        target: Target,
        *,
        pool_size: int = 15,
        replica: str | None = None,
    ) -> None:
        """`replica`: a daemon's own name among the replicas sharing the database."""
        self.target = target
        self.replica = replica
        self.dialect = "sqlite" if target.is_sqlite else "postgresql"
        self._closed = False
        if target.is_sqlite:
            self._writer = _sqlite_engine(target, "write", 1)
            self._reader = _sqlite_engine(target, "read", SQLITE_READ_THREADS)
            self._write_thread = ThreadPoolExecutor(1, thread_name_prefix="chatterd-db-write")
            self._read_threads = ThreadPoolExecutor(
                SQLITE_READ_THREADS, thread_name_prefix="chatterd-db-read"
            )
            return
        # No overflow: the pool is exactly what the connection budget counted (capacity.py).
        self._engine = _postgres_engine(target, pool_size, max_overflow=0, replica=replica)
        self._autocommit = self._engine.execution_options(isolation_level="AUTOCOMMIT")

    @staticmethod
    def _in_transaction(engine: Engine, fn: Callable[[Connection], T]) -> T:
        with engine.begin() as conn:
            return fn(conn)

    @staticmethod
    def _autocommit_sqlite(engine: Engine, fn: Callable[[Connection], T]) -> T:
        with engine.connect() as conn:
            return fn(conn)

    async def write(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` in one transaction: committed if it returns, rolled back if it raises."""
        if self.target.is_sqlite:
            job = partial(self._in_transaction, self._writer, fn)
            return await asyncio.get_running_loop().run_in_executor(self._write_thread, job)
        async with self._engine.begin() as conn:
            return await conn.run_sync(fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run read-only `fn` without a transaction (each statement sees committed data)."""
        if self.target.is_sqlite:
            job = partial(self._autocommit_sqlite, self._reader, fn)
            return await asyncio.get_running_loop().run_in_executor(self._read_threads, job)
        if self.target.pgbouncer:
            # asyncpg prepares, then executes: outside a transaction PgBouncer may send
            # the two to different server connections, so a read is a transaction too.
            async with self._engine.begin() as conn:
                return await conn.run_sync(fn)
        async with self._autocommit.connect() as conn:
            return await conn.run_sync(fn)

    async def migrate(self, fn: Callable[[Connection], T]) -> T:
        """Like write(), but with transactional DDL on SQLite too."""
        if not self.target.is_sqlite:
            return await self.write(fn)
        engine = _sqlite_engine(self.target, "migrate", 1)
        try:
            job = partial(self._in_transaction, engine, fn)
            return await asyncio.get_running_loop().run_in_executor(self._write_thread, job)
        finally:
            engine.dispose()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.target.is_sqlite:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._write_thread, self._writer.dispose)
            self._reader.dispose()
            self._write_thread.shutdown(wait=False)
            self._read_threads.shutdown(wait=False)
            return
        await self._engine.dispose()


# Alembic (and Mako under it) stays resident for as long as the daemon runs, yet a
# database already at this code's head needs none of it: that case is recognised
# with one query and the revision lines of the migration files, and Alembic is imported
# only when there is something to migrate.
_REVISION_LINE = re.compile(r"^(down_revision|revision)\b[^=]*=\s*['\"]?([\w]+)?", re.M)


def alembic_config() -> Config:
    """Alembic's configuration built in code: no alembic.ini to ship or to find."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade_connection(connection: Connection) -> None:
    """Apply pending migrations inside the caller's transaction; replicas wait in turn."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    head = shipped_head()
    if head is not None and revision_of(connection) == head:
        return
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def revision_of(connection: Connection) -> str | None:
    """The revision recorded in the database (None for an empty one)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    return str(rows[0][0]) if len(rows) == 1 else None


def shipped_head() -> str | None:
    """The one revision no migration file builds on, read from the files' revision lines
    (None when that is not a single one: then Alembic decides)."""
    revisions, parents = set(), set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        text = path.read_text("utf-8")
        found = {m.group(1): m.group(2) or "" for m in _REVISION_LINE.finditer(text)}
        if found.get("revision"):
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(found["down_revision"])
    heads = revisions - parents
    return next(iter(heads)) if len(heads) == 1 else None


def head_revision() -> str | None:
    """The newest revision this code ships."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_async(url: str) -> None:
    """Bring the database at `url` to the newest schema (for callers inside a loop)."""
    database = Database(parse_url(url), pool_size=1)
    try:
        await database.migrate(upgrade_connection)
        log.info("database schema at revision %s", await database.read(revision_of))
    finally:
        await database.close()


async def upgrade_in_child(url: str) -> bool:
    """Migrate in a child process when the database is behind this code's head.

    Why: the daemon that ran Alembic itself would keep it in memory for as long as it
    runs. The URL goes to the child on stdin, never on its command line (which other
    local users can read). False when the database was already at head; a failing
    child is not fatal here: `open_storage` then migrates in-process and reports the
    real error.
    """
    database = Database(parse_url(url), pool_size=1)
    try:
        if await database.read(revision_of) == shipped_head():
            return False
    finally:
        await database.close()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import sys; from memory.db.migrate import upgrade; upgrade(sys.stdin.read())",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        cwd=os.getcwd(),
    )
    _, err = await child.communicate(url.encode())
    if child.returncode != 0:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        kind = last[0].split(":", 1)[0][:80]  # the exception's type: no URL, no secret
        log.warning("schema migration in a child process failed (%s); retrying here", kind)
    return True


def upgrade(url: str) -> None:
    """`chatterd db upgrade`: bring the database at `url` to the newest schema.

    Runs its own event loop, so call it from synchronous code only.
    """
    asyncio.run(upgrade_async(url))
