"""Jobs across kill -9: 30 jobs (pictures and background tasks) on the real `chatterd run`
process, killed with SIGKILL at random moments and restarted, until every job has ended.

Measured per job (one person, one private chat, one job each): how many times its end
reached the chat (a photo, a task's answer, or a one-line failure), counted at the fake
Bot API: the target is exactly once for every job, 0 twice, 0 lost. Also counted: jobs
stored per person (a turn run again after a kill must not start a second task), provider
calls (a picture killed while drawing is asked again; one kept before the kill is not),
and how many jobs were resumed or given up. The fakes (Telegram, the chat model, the image
provider) run in this process; the daemon is a child process, on SQLite in a temporary
folder or on a fresh PostgreSQL schema (`--db postgresql+asyncpg://...`).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402
from sqlalchemy.pool import NullPool  # noqa: E402

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from memory.db.migrate import Database, parse_url  # noqa: E402
from memory.jobs.store import JobStore  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, content_text  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, entity, private_chat, user  # noqa: E402
from tests.faults.daemon import Daemon, daemon_env, free_port  # noqa: E402

SECTION = "jobs-kill-bench"
TASK_SYSTEM = "working in the background on task"
STEPS = 3  # tool steps of each task before it answers
ACKS = ("🎨 drawing… (#", "🔧 working on it")


def task_model(body: dict[str, Any]) -> str:
    """A turn spawns a task; a task writes STEPS notes, one a step, then answers."""
    said = [content_text(m.get("content")) for m in body["messages"]]
    if TASK_SYSTEM not in said[0]:
        if any("spawn_result" in line for line in said):
            return "🔧 working on it."
        return "[Spawn: write three notes about kites]"
    done = sum(1 for m in body["messages"][2:] if m["role"] == "assistant")
    if done < STEPS:
        return f"[Remember: kite note {done + 1}]"
    return "Three notes written about kites."


def outcomes(tg: FakeTelegram, chat_id: int) -> int:
    """Ends of jobs that reached this chat: photos, and texts that are not the acks."""
    photos = sum(1 for p in tg.photos if int(p["chat_id"]) == chat_id)
    texts = [
        str(s.get("text", ""))
        for s in tg.sent
        if int(s["chat_id"]) == chat_id and not str(s.get("text", "")).startswith(ACKS)
    ]
    return photos + sum(1 for t in texts if t.startswith(("🔧 #", "🎨 #", "Sorry, job #")))


async def ended(url: str) -> tuple[int, list[Any]]:
    database = Database(parse_url(url))
    try:
        jobs = await JobStore(database).recent(limit=200)
    except Exception:  # not migrated yet: the first daemon has not started
        return 0, []
    finally:
        await database.close()
    done = [j for j in jobs if j.state in ("done", "failed", "cancelled") and j.delivered_at]
    return len(done), jobs


async def run(url: str, pictures: int, tasks: int, kills: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    people = [user(5001 + n, f"P{n}") for n in range(pictures + tasks)]
    async with FakeOpenAI(reply=task_model, latency_s=0.3) as model, FakeTelegram() as tg:
        model.image_latency_s = 3.0
        with tempfile.TemporaryDirectory() as folder:
            port = free_port()
            env = daemon_env(
                Path(folder),
                storage_url=url,
                model_url=model.base_url,
                http_port=port,
                extra={
                    "CHATTERD_TELEGRAM__ENABLED": "true",
                    "CHATTERD_TELEGRAM__TOKEN": tg.token,
                    "CHATTERD_TELEGRAM__API_BASE_URL": tg.root,
                    "CHATTERD_IMAGES__ENABLED": "true",
                    "CHATTERD_IMAGES__ALLOW": '"everyone"',
                    "CHATTERD_TOOLS__SEARCH": "false",
                    "CHATTERD_JOBS__LEASE_S": "5",
                    "CHATTERD_JOBS__MAX_RUNNING": "6",
                },
            )
            daemons: list[Daemon] = []

            async def start() -> Daemon:
                daemon = Daemon(env, Path(folder) / f"daemon-{len(daemons)}.log", port)
                daemons.append(daemon)
                return await daemon.start()

            began = time.perf_counter()
            current = await start()
            for n, person in enumerate(people):
                if n < pictures:
                    words = f"/draw a kite number {n}"
                    marks = [entity("bot_command", words, "/draw")]
                    tg.push_message(private_chat(person), person, words, entities=marks)
                else:
                    tg.push_message(private_chat(person), person, "write notes, please")
            kill_times: list[float] = []
            for _ in range(kills):
                await asyncio.sleep(rng.uniform(1.0, 7.0))
                current.kill()
                await current.wait()
                kill_times.append(round(time.perf_counter() - began, 1))
                current = await start()
            deadline = time.perf_counter() + 150
            total = pictures + tasks
            while time.perf_counter() < deadline:
                count, jobs = await ended(url)
                if count >= total and all(outcomes(tg, int(p["id"])) for p in people):
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(2.0)  # a second send of anything would come within a pass
            await current.terminate()
            for daemon in daemons:
                await daemon.close()
            elapsed = time.perf_counter() - began
            keep = Path(tempfile.gettempdir()) / f"jobs-kill-bench-{seed}"
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(folder, keep, ignore=shutil.ignore_patterns("workspace"))
            _, jobs = await ended(url)
    for person in people:  # what a person who did not get one end saw, to read why
        if outcomes(tg, int(person["id"])) != 1:
            seen = [s.get("text") for s in tg.sent if int(s["chat_id"]) == person["id"]]
            shots = [p.get("caption") for p in tg.photos if int(p["chat_id"]) == person["id"]]
            print("not once:", person["first_name"], seen, shots, file=sys.stderr)
    for job in jobs:
        if job.state == "failed":
            print("failed:", job.id, job.kind, job.attempts, job.outcome, file=sys.stderr)
    per_person = Counter(outcomes(tg, int(p["id"])) for p in people)
    stored = Counter(j.chat_id for j in jobs)
    kinds = Counter(j.kind for j in jobs)
    return {
        "jobs": len(jobs),
        "pictures": kinds["draw"],
        "tasks": kinds["task"],
        "once": per_person[1],
        "twice": sum(v for k, v in per_person.items() if k > 1),
        "lost": per_person[0],
        "extra_jobs": sum(c - 1 for c in stored.values() if c > 1),
        "failed": sum(1 for j in jobs if j.state == "failed"),
        "resumed": sum(1 for j in jobs if j.attempts > 1),
        "image_calls": len(model.image_requests),
        "images_answered": model.images_answered,
        "kills": kill_times,
        "elapsed_s": round(elapsed, 1),
    }


async def fresh_schema(base: str) -> tuple[str, str]:
    from sqlalchemy.engine import make_url

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    engine = create_async_engine(base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    await engine.dispose()
    url = make_url(base).update_query_dict({"search_path": schema})
    return url.render_as_string(hide_password=False), schema


async def drop_schema(base: str, schema: str) -> None:
    engine = create_async_engine(base, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    await engine.dispose()


def row(name: str, r: dict[str, Any]) -> str:
    return (
        f"| {name} | {r['jobs']} ({r['pictures']} pictures, {r['tasks']} tasks) | "
        f"{len(r['kills'])} at {', '.join(f'{k:g}' for k in r['kills'])} s | {r['once']} | "
        f"{r['twice']} | {r['lost']} | {r['extra_jobs']} | {r['resumed']} | {r['failed']} | "
        f"{r['image_calls']} / {r['images_answered']} | {r['elapsed_s']:g} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pictures", type=int, default=15)
    parser.add_argument("--tasks", type=int, default=15)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--runs", type=int, default=1, help="runs per database")
    parser.add_argument("--pg", default="", help="a PostgreSQL URL: also run there")
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()
    rows = []
    for n in range(args.runs):
        seed = args.seed + 2 * n
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{folder}/bench.sqlite"
            result = await run(url, args.pictures, args.tasks, args.kills, seed)
            print("sqlite", result, flush=True)
            rows.append(row("SQLite", result))
        if args.pg:
            url, schema = await fresh_schema(args.pg)
            try:
                result = await run(url, args.pictures, args.tasks, args.kills, seed + 1)
            finally:
                await drop_schema(args.pg, schema)
            print("postgresql", result, flush=True)
            rows.append(row("PostgreSQL", result))
    table = "\n".join(
        [
            f"{args.pictures} `/draw` and {args.tasks} background tasks ({STEPS} tool steps "
            "each), one per person, sent at once to the real `chatterd run` process; SIGKILL "
            "at random moments (1-7 s apart), restarted each time, `[jobs] lease_s = 5`, "
            "`max_running = 6`; provider 3 s a picture, model 0.3 s a call. Target: every "
            "job's end (photo, answer or one-line failure) in its chat exactly once.",
            "",
            "| database | jobs | kills | once | twice | lost | extra jobs | resumed | "
            "told failed | provider calls / pictures paid | seconds |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
            *rows,
            "",
            f"{cpu_model()}, load average {load_average()}. *kills*: seconds after the first "
            "start (a start takes 3-6 s). *resumed*: jobs claimed again after a kill "
            "(attempts > 1); a picture killed while drawing is asked again, so provider "
            "calls exceed the pictures kept. *told failed*: jobs interrupted on all 3 "
            "attempts (kills about 10 s apart, a job taken over 5 s after one, a picture "
            "drawn in 3 s), each told once in one line. Before the runner fix of this "
            "round (a stored-outcome pass racing a job's own send), 1-2 of 30 were sent "
            "twice in 3 of 7 runs.",
            "",
        ]
    )
    print(table)
    if args.write:
        write_section(SECTION, table)


if __name__ == "__main__":
    asyncio.run(main())
