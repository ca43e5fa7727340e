"""Replicas at default settings on one PostgreSQL: N chats x M messages over HTTP, a
chat's messages spread over the replicas, a fake model answering in `--latency` seconds.

Measured per setup (1, 2, 4 replicas; 2 behind PgBouncer in transaction mode): the wall
time of the load (replicas already started), the peak of the replicas' connections to
PostgreSQL (pg_stat_activity, sampled every 50 ms; behind PgBouncer that is PgBouncer's
server connections, named after whichever client used them last, so the peak is only
indicative there), and the facts the replica tests assert: every message answered once
and in order, how many reached the model more than once, how many turns missed an
earlier reply. Each setup gets a fresh schema of `--db` (dropped afterwards).

    python bench/scale_bench.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/test --write
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402
from sqlalchemy.pool import NullPool  # noqa: E402

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.faults.daemon import Daemon, daemon_env, free_port  # noqa: E402
from tests.scale import bouncer  # noqa: E402
from tests.scale.load import (  # noqa: E402
    Connections,
    Load,
    echo,
    model_calls,
    stored_conversations,
    text_of,
    unseen_replies,
)

SECTION = "scale-bench"


async def _admin(base: str, statement: str) -> None:
    engine = create_async_engine(base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


async def one_setup(base: str, replicas: int, bounced: bool, args: argparse.Namespace) -> str:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    await _admin(base, f'CREATE SCHEMA "{schema}"')
    url = make_url(base).update_query_dict({"search_path": schema})
    direct = url.render_as_string(hide_password=False)
    folder = Path(tempfile.mkdtemp(prefix="chatterd-scale-"))
    daemons: list[Daemon] = []
    try:
        async with FakeOpenAI(reply=echo, latency_s=args.latency) as model:
            if bounced:
                async with bouncer.pgbouncer(direct) as storage_url:
                    row = await _measure(
                        storage_url, direct, replicas, model, folder, daemons, args
                    )
            else:
                row = await _measure(direct, direct, replicas, model, folder, daemons, args)
        name = f"{replicas} behind PgBouncer" if bounced else str(replicas)
        return f"| {name} | " + row
    finally:
        for daemon in daemons:
            await daemon.close()
        await _admin(base, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        shutil.rmtree(folder, ignore_errors=True)


async def _measure(
    storage_url: str,
    direct_url: str,
    replicas: int,
    model: FakeOpenAI,
    folder: Path,
    daemons: list[Daemon],
    args: argparse.Namespace,
) -> str:
    for index in range(replicas):
        env = daemon_env(
            folder, storage_url=storage_url, model_url=model.base_url, http_port=free_port()
        )
        daemons.append(
            Daemon(env, folder / f"replica-{index}.log", int(env["CHATTERD_HTTP__PORT"]))
        )
    await asyncio.gather(*(d.start(within_s=180) for d in daemons))
    load = Load(daemons, args.chats, args.messages)
    async with Connections(direct_url) as connections:
        started = time.perf_counter()
        await load.run(1800)
        wall = time.perf_counter() - started
    for failure in load.failures[:5]:
        print("failure:", failure[:300], flush=True)
    expected = {
        c: [part for k in range(args.messages) for part in (text_of(c, k), f"re {text_of(c, k)}")]
        for c in range(args.chats)
    }
    stored = await stored_conversations(direct_url, args.chats)
    wrong = sum(1 for c, turns in stored.items() if turns != expected[c])
    twice = sum(1 for n in model_calls(model).values() if n > 1)
    answered = sum(len(replies) for replies in load.answers.values())
    total = args.chats * args.messages
    return (
        f"{answered}/{total} | {wrong} | {twice} | {len(unseen_replies(model))} | "
        f"{connections.peak} | {wall:.1f} s | {answered / wall:.0f} |\n"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a PostgreSQL URL (postgresql+asyncpg://)")
    parser.add_argument("--chats", type=int, default=600)
    parser.add_argument("--messages", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--no-pgbouncer", action="store_true")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    setups = [(int(n), False) for n in args.replicas.split(",")]
    if not args.no_pgbouncer and bouncer.available():
        setups.append((2, True))
    table = (
        f"{args.chats} chats x {args.messages} messages over HTTP, the model answering in "
        f"{args.latency} s, replicas at default settings ([storage] pool_size 15, "
        f"[bot] max_in_flight 64). CPU: {cpu_model()}; load average before: "
        f"{load_average()}.\n\n"
        "| replicas | answered | chats out of order | sent to the model twice | "
        "turns missing an earlier reply | peak connections | wall | messages/s |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    for replicas, bounced in setups:
        row = await one_setup(args.db, replicas, bounced, args)
        print(row, end="", flush=True)
        table += row
    print(table)
    if args.write:
        write_section(SECTION, table)


if __name__ == "__main__":
    asyncio.run(main())
