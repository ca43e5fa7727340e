"""The console's chat list at 100,000 chats: keyset pages over the 0006 columns.

Candidates (memory.console.browse.Browse, what the console runs): the first page, a page 50,000
chats deep, and two searches. References, in the same process on the same SQLite file:
- *aggregate*: the first page the way it would be read without migration 0006, by
  grouping `turns` per chat (last activity = newest turn, turns = count);
- *offset*: the deep page with OFFSET over the same 0006 index (walks the rows before it).
The write side: storing a turn pair through SqlStorage (which now also updates the chat's
row) against the same store with that UPDATE left out.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import Connection, func, insert, select, text  # noqa: E402

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from memory.chats.models import Chat, User  # noqa: E402
from memory.console.browse import Browse, _chat_cursor  # noqa: E402
from memory.turns.models import TurnRow  # noqa: E402
from memory.turns.store import SqlStorage, open_storage  # noqa: E402
from memory.turns.types import NewTurn  # noqa: E402
from memory.usage.models import UsageRow  # noqa: E402

SECTION = "console-bench"
PAGE = 50
TURNS_PER_CHAT = 5
T0 = datetime(2026, 10, 1, tzinfo=UTC)


def fill(conn: Connection, chats: int, seed: int) -> None:
    """`chats` chats with users, TURNS_PER_CHAT turns each and one usage row each."""
    rng = random.Random(seed)
    batch = 20_000
    for start in range(0, chats, batch):
        rows = range(start, min(chats, start + batch))
        active = {n: T0 + timedelta(seconds=rng.randrange(30 * 86400)) for n in rows}
        conn.execute(
            insert(User),
            [{"id": n + 1, "platform": "telegram", "platform_user_id": str(n),
              "display_name": f"Person {n}", "created_at": T0} for n in rows],
        )  # fmt: skip
        conn.execute(
            insert(Chat),
            [{"id": n + 1, "platform": "telegram", "platform_chat_id": f"-100{n}",
              "chat_type": "group" if n % 3 else "private",
              "title": f"Tea club {n}" if n % 100 == 0 else f"Chat {n}",
              "created_at": T0, "last_active_at": active[n], "turn_count": TURNS_PER_CHAT}
             for n in rows],
        )  # fmt: skip
        conn.execute(
            insert(TurnRow),
            [{"chat_id": n + 1, "sender_user_id": n + 1 if k % 2 == 0 else None,
              "role": "user" if k % 2 == 0 else "assistant", "kind": "message",
              "content": "hello there, how are you today?", "token_count": 9, "meta": {},
              "created_at": active[n] - timedelta(minutes=TURNS_PER_CHAT - k)}
             for n in rows for k in range(TURNS_PER_CHAT)],
        )  # fmt: skip
        conn.execute(
            insert(UsageRow),
            [{"day": date(2026, 10, 1) + timedelta(days=n % 30), "platform": "telegram",
              "chat_id": f"-100{n}", "user_id": str(n), "model": "m", "purpose": "reply",
              "prompt_tokens": 500, "completion_tokens": 50, "calls": 1, "estimated_calls": 0}
             for n in rows],
        )  # fmt: skip


def aggregate_page(conn: Connection) -> list[Any]:
    """The reference: the first page computed from `turns`, as without 0006."""
    last = func.max(TurnRow.created_at).label("last")
    per_chat = (
        select(TurnRow.chat_id, last, func.count().label("turns"))
        .group_by(TurnRow.chat_id)
        .order_by(last.desc(), TurnRow.chat_id.desc())
        .limit(PAGE)
        .subquery()
    )
    query = select(Chat.platform, Chat.platform_chat_id, per_chat.c.last, per_chat.c.turns).join(
        per_chat, per_chat.c.chat_id == Chat.id
    )
    rows = conn.execute(query).all()
    sums = select(UsageRow.chat_id, func.sum(UsageRow.prompt_tokens)).where(
        UsageRow.chat_id.in_([r.platform_chat_id for r in rows])
    )
    conn.execute(sums.group_by(UsageRow.chat_id)).all()
    return list(rows)


def offset_page(conn: Connection, offset: int) -> list[Any]:
    query = (
        select(Chat.id, Chat.platform_chat_id, Chat.last_active_at)
        .order_by(Chat.last_active_at.desc(), Chat.id.desc())
        .offset(offset)
        .limit(PAGE)
    )
    return list(conn.execute(query).all())


async def median_ms(call: Callable[[], Awaitable[object]], runs: int) -> float:
    await call()  # warm the page cache and statement cache
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        await call()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


class NoTouch(SqlStorage):
    """The reference store: turns stored without updating the chat's row."""

    def _touch_chats(self, conn: Connection, touched: list[dict[str, Any]]) -> None:
        return None


def pair(i: int) -> list[NewTurn]:
    return [
        NewTurn("http", f"w{i % 200}", "private", "user", "message", "what's new?", 4,
                f"u{i % 200}", f"user {i % 200}", f"m{i}"),
        NewTurn("http", f"w{i % 200}", "private", "assistant", "message", "Not much.", 3),
    ]  # fmt: skip


async def write_cost(store: SqlStorage, reference: SqlStorage, pairs: int) -> tuple[float, float]:
    """Mean ms per turn pair, interleaved in rounds so drift hits both alike."""
    spent = {"candidate": 0.0, "reference": 0.0}
    rounds, per_round = 10, pairs // 10
    for r in range(rounds):
        for name, target in (("candidate", store), ("reference", reference)):
            base = (r * per_round) + (0 if name == "candidate" else 10_000_000)
            began = time.perf_counter()
            for i in range(base, base + per_round):
                await target.add_turns(pair(i))
            spent[name] += time.perf_counter() - began
    return spent["candidate"] * 1000 / pairs, spent["reference"] * 1000 / pairs


async def run(chats: int, runs: int, pairs: int, seed: int) -> str:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/bench.sqlite"
        store = await open_storage(url)
        try:
            began = time.perf_counter()
            await store.database.write(lambda conn: fill(conn, chats, seed))
            fill_s = time.perf_counter() - began
            db = store.database
            browse = Browse(db)
            deep = chats // 2
            anchor = await db.read(lambda conn: offset_page(conn, deep - 1))
            cursor = _chat_cursor(anchor[0])
            keyset_deep = await browse.chats(limit=PAGE, after=cursor)
            offset_deep = await db.read(lambda conn: offset_page(conn, deep))
            same = [r.platform_chat_id for r in offset_deep]
            assert [r.chat_id for r in keyset_deep.rows] == same, "keyset and OFFSET disagree"
            plan_sql = (
                "EXPLAIN QUERY PLAN SELECT id FROM chats WHERE (last_active_at, id) < (?, ?) "
                "ORDER BY last_active_at DESC, id DESC LIMIT 50"
            )
            plan = await db.read(
                lambda conn: conn.exec_driver_sql(plan_sql, ("2026-10-15 00:00:00", 1)).all()
            )
            timings = {
                "first": await median_ms(lambda: browse.chats(limit=PAGE), runs),
                "aggregate": await median_ms(lambda: db.read(aggregate_page), max(3, runs // 10)),
                "deep": await median_ms(lambda: browse.chats(limit=PAGE, after=cursor), runs),
                "offset": await median_ms(lambda: db.read(lambda c: offset_page(c, deep)), runs),
                "search_common": await median_ms(
                    lambda: browse.chats(limit=PAGE, search="tea club"), runs
                ),
                "search_none": await median_ms(
                    lambda: browse.chats(limit=PAGE, search="no such chat"), max(3, runs // 5)
                ),
            }
            counted = await db.read(
                lambda conn: conn.execute(text("SELECT count(*) FROM chats")).scalar()
            )
            reference = NoTouch(await _reopen(url))
            try:
                write_ms, reference_ms = await write_cost(store, reference, pairs)
            finally:
                await reference.close()
        finally:
            await store.close()
    return report(chats, runs, pairs, seed, fill_s, timings, write_ms, reference_ms, plan,
                  int(counted or 0), deep, time.perf_counter() - started)  # fmt: skip


async def _reopen(url: str) -> Any:
    from memory.db.migrate import Database, parse_url

    return Database(parse_url(url))


def report(
    chats: int, runs: int, pairs: int, seed: int, fill_s: float, t: dict[str, float],
    write_ms: float, reference_ms: float, plan: list[Any], counted: int, deep: int,
    total_s: float,
) -> str:  # fmt: skip
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page_target = 20.0
    worst_page = max(t["first"], t["deep"], t["search_common"])
    steps = "; ".join(str(row[-1]) for row in plan)
    lines = [
        "## Console chat list (bench/console_bench.py)",
        "",
        "Command: `.venv/bin/python bench/console_bench.py`  ",
        f"Machine: {cpu_model()}, Python {sys.version.split()[0]}; run {now}, "
        f"{total_s:.0f} s in all (filling the database {fill_s:.0f} s); load average (1 min) "
        f"{load_average()} at the end.",
        "",
        f"**Data** (seed {seed}): {counted:,} chats on SQLite (WAL), each with a user, "
        f"{TURNS_PER_CHAT} turns ({counted * TURNS_PER_CHAT:,} in all) and one usage row; "
        'last activity spread over 30 days; 1% of titles contain "Tea club". '
        f"Pages of {PAGE}; medians of {runs} reads (the references: fewer, they are slow). "
        f"The query plan of a keyset page: `{steps}`.",
        "",
        "### Targets",
        "",
        "| target | measured | result |",
        "|---|---|---|",
        f"| any page of the chat list (first, {deep:,} deep, a search with matches) in ≤ "
        f"{page_target:.0f} ms at 100k chats | worst {worst_page:.2f} ms | "
        f"**{'PASS' if worst_page <= page_target and counted >= 100_000 else 'FAIL'}** |",
        f"| the first page faster than reading it from `turns` (reference *aggregate*) | "
        f"{t['aggregate'] / t['first']:.1f}x faster | "
        f"**{'PASS' if t['first'] < t['aggregate'] else 'FAIL'}** |",
        f"| a deep page faster than OFFSET (reference *offset*) | "
        f"{t['offset'] / t['deep']:.1f}x faster | "
        f"**{'PASS' if t['deep'] < t['offset'] else 'FAIL'}** |",
        "",
        "### Measurements",
        "",
        "| read | ms (median) | vs reference |",
        "|---|---:|---:|",
        f"| first page, keyset (`Browse.chats`) | {t['first']:.2f} | "
        f"{t['aggregate'] / t['first']:.1f}x faster than *aggregate* |",
        f"| reference *aggregate*: first page grouped from `turns` | {t['aggregate']:.2f} | 1x |",
        f"| page {deep:,} chats deep, keyset | {t['deep']:.2f} | "
        f"{t['offset'] / t['deep']:.1f}x faster than *offset* |",
        f"| reference *offset*: the same page with OFFSET {deep:,} | {t['offset']:.2f} | 1x |",
        f'| search "tea club" (matches 1%), first page | {t["search_common"]:.2f} | '
        f"{t['search_common'] / t['first']:.1f}x the first page |",
        f"| search with no match (reads every title and id once) | {t['search_none']:.2f} | "
        f"{t['search_none'] / t['first']:.1f}x the first page |",
        "",
        f"**The write side.** {pairs:,} turn pairs (user turn + reply, one transaction each, "
        f"200 chats): {write_ms:.3f} ms per pair with the chat's activity UPDATE, "
        f"{reference_ms:.3f} ms without it (reference, same file, interleaved in 10 rounds): "
        f"{write_ms / reference_ms:.2f}x.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--no-write", action="store_true", help="print, do not edit RESULTS.md")
    args = parser.parse_args()
    text_out = asyncio.run(run(args.chats, args.runs, args.pairs, args.seed))
    print(text_out)
    if not args.no_write:
        write_section(SECTION, text_out)


if __name__ == "__main__":
    main()
