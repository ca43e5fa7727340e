"""What durable intake costs per turn: the writes of a turn with and without it.

Reference: the two writes a turn made before the intake existed (store the user turn,
then store the reply). Candidate: what it makes now (the intake INSERT, then the user
turn, the reply and the intake's new state in one transaction). Both run in this
process, on the same SQLite file (WAL), one chat per turn, so the ratio is the intake's
share of the storage work; the turn bench (bench/turn_bench.py) shows the whole turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from memory.turns.store import SqlStorage, open_storage  # noqa: E402
from memory.turns.types import IntakeDraft, NewTurn  # noqa: E402

SECTION = "intake-bench"


def user_turn(i: int) -> NewTurn:
    return NewTurn(
        platform="http",
        chat_id=f"c{i}",
        chat_type="private",
        role="user",
        kind="message",
        content=f"[user {i}]: what is the weather like in Oslo today?",
        token_count=14,
        sender_id=f"u{i}",
        sender_name=f"user {i}",
        platform_message_id=f"m{i}",
    )


def reply_turn(i: int) -> NewTurn:
    return NewTurn(
        platform="http",
        chat_id=f"c{i}",
        chat_type="private",
        role="assistant",
        kind="message",
        content="Cloudy, 7 °C, light rain in the evening.",
        token_count=12,
    )


async def reference(store: SqlStorage, start: int, n: int) -> float:
    began = time.perf_counter()
    for i in range(start, start + n):
        await store.add_turn(user_turn(i))
        await store.add_turns([reply_turn(i)])
    return (time.perf_counter() - began) / n


async def with_intake(store: SqlStorage, start: int, n: int) -> float:
    began = time.perf_counter()
    for i in range(start, start + n):
        draft = IntakeDraft(
            "http", f"c{i}", "private", f"u{i}", f"user {i}", "what is the weather?", f"m{i}"
        )
        entry = await store.intake.accept(draft)
        assert entry is not None
        assert await store.settle(entry.id, [user_turn(i), reply_turn(i)], "delivered")
    return (time.perf_counter() - began) / n


async def run(rounds: int, turns: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as folder:
        store = await open_storage(f"sqlite:///{Path(folder) / 'bench.sqlite'}")
        try:
            await reference(store, 10_000_000, 50)  # warm caches and statement compilation
            await with_intake(store, 20_000_000, 50)
            ref: list[float] = []
            new: list[float] = []
            for r in range(rounds):  # alternate, so machine noise hits both alike
                ref.append(await reference(store, r * 2 * turns, turns))
                new.append(await with_intake(store, (r * 2 + 1) * turns, turns))
            return ref, new
        finally:
            await store.close()


def report(ref: list[float], new: list[float], rounds: int, turns: int) -> str:
    ref_ms, new_ms = statistics.median(ref) * 1000, statistics.median(new) * 1000
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "## Intake cost (bench/intake_bench.py)\n\n"
        f"Command: `.venv/bin/python bench/intake_bench.py`  \n"
        f"Machine: {cpu_model()}; run {when}; load average (1 min) {load_average()}.\n\n"
        "Storage writes of one turn on SQLite (WAL), median of "
        f"{rounds} alternating rounds of {turns} turns. Reference: the writes a turn made "
        "before the intake (user turn, reply). With intake: the intake INSERT, then the "
        "user turn, the reply and the intake state in one transaction.\n\n"
        "| run | ms per turn | ratio |\n|---|---:|---:|\n"
        f"| reference: user turn + reply | {ref_ms:.3f} | 1.00x |\n"
        f"| with intake: accept + (user turn, reply, state) | {new_ms:.3f} | "
        f"{new_ms / ref_ms:.2f}x |\n\n"
        f"The intake adds {new_ms - ref_ms:.3f} ms of storage work per turn.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    ref, new = asyncio.run(run(args.rounds, args.turns))
    text = report(ref, new, args.rounds, args.turns)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
