"""A PgBouncer in transaction pooling mode in front of the test PostgreSQL, started by a
test on a free port (Debian's `pgbouncer`; .ci/run installs it). The test's schema is set
by PgBouncer on each server connection (connect_query): PgBouncer passes no search_path
from the client, which is how an operator sets a schema behind it too."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.faults.daemon import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def available() -> bool:
    return Path(PGBOUNCER).exists()


@asynccontextmanager
async def pgbouncer(database_url: str) -> AsyncIterator[str]:
    """Yield the storage URL (with ?pgbouncer=true) that reaches `database_url`'s
    database and schema through a fresh PgBouncer in transaction mode."""
    url = make_url(database_url)
    port = free_port()
    folder = _write_config(database_url, port)
    config = folder / "pgbouncer.ini"
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    with (folder / "pgbouncer.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            PGBOUNCER, *user, str(config), stdout=log, stderr=log
        )
    try:
        await _until_listening(port, proc)
        bounced = url.set(host="127.0.0.1", port=port, database="chatterd")
        bounced = bounced.difference_update_query(["search_path"])
        bounced = bounced.update_query_dict({"pgbouncer": "true"})
        yield bounced.render_as_string(hide_password=False)
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _write_config(database_url: str, port: int) -> Path:
    """PgBouncer's folder with its pgbouncer.ini: transaction mode, any client name."""
    url = make_url(database_url)
    schema = url.query.get("search_path")
    assert isinstance(schema, str | None)
    # Not under pytest's tmp_path: PgBouncer refuses to run as root and drops to the
    # postgres user, who must be able to read its files.
    folder = Path(tempfile.mkdtemp(prefix="chatterd-pgbouncer-"))
    folder.chmod(0o755)
    connect = f" connect_query='SET search_path TO {schema}'" if schema else ""
    config = folder / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"chatterd = host={url.host} port={url.port or 5432} dbname={url.database} "
        f"user={url.username}{connect}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\n"
        "max_client_conn = 1000\ndefault_pool_size = 20\n"
    )
    config.chmod(0o644)
    return folder


async def _until_listening(port: int, proc: asyncio.subprocess.Process) -> None:
    async with asyncio.timeout(20):
        while True:
            if proc.returncode is not None:
                raise AssertionError(f"pgbouncer exited with {proc.returncode}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            return
