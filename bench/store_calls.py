"""CPU per call of the storage calls a turn makes, this tree against another, on SQLite.

Why: on a shared machine the daemon's turns/s and even its CPU per turn move with what
else runs; one storage call repeated a thousand times in one process, its CPU read with
process_time (the loop and the SQLite threads together), is steadier, so a change to a
statement can be judged call by call. The history read is timed at three lengths: what
it costs grows with the chat's history up to [context] history_limit (200 by default).

Run: .venv/bin/python bench/store_calls.py [--before REV] [--rounds 2]
Prints a Markdown table (REV is extracted with `git archive` and run with this venv).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALLS = 1000
HISTORY = 200  # turns stored in the chat whose history is read


async def measure(repeat: int) -> dict[str, float]:
    """Microseconds of process CPU per call, for each call (imports the tree on sys.path)."""
    from memory.turns.store import open_storage
    from memory.turns.types import IntakeDraft, NewTurn
    from memory.usage.types import UsageDelta

    with tempfile.TemporaryDirectory() as folder:
        store = await open_storage(f"sqlite:///{folder}/calls.sqlite")
        try:
            for i in range(0, HISTORY, 2):
                asked = f"[ann]: message {i}, a line of an ordinary length in a chat"
                await store.add_turns(
                    [
                        NewTurn("http", "c", "private", "user", "message", asked, 14, "ann", "Ann"),
                        NewTurn("http", "c", "private", "assistant", "message", "ok " * 30, 30),
                    ]
                )
            draft = IntakeDraft(
                platform="http",
                chat_id="c",
                chat_type="private",
                sender_id="ann",
                sender_name="Ann",
                text="hi",
                platform_message_id="m1",
                received_at=datetime.now(UTC),
            )
            entry = await store.intake.accept(draft)
            assert entry is not None
            ids = iter(range(10**9))
            spend = UsageDelta(datetime.now(UTC).date(), "http", "c", "ann", "m", "reply", 90, 9)
            calls: dict[str, Callable[[], Awaitable[object]]] = {
                "intake: move (a reply delivered)": lambda: store.intake.move(
                    entry.id, "answered", expected=["pending", "answered"], delivery={"m": [1]}
                ),
                "chat settings: read": lambda: store.chat_settings.get("http", "c"),
            }
            for rows in (10, 40, HISTORY):
                calls[f"history read, {rows} turns"] = lambda rows=rows: store.turn_material(
                    "http", "c", "ann", rows, None
                )
            calls["intake: accept (a new message)"] = lambda: store.intake.accept(
                replace(draft, platform_message_id=f"n{next(ids)}")
            )
            calls["turns: store a message and its reply"] = lambda: store.add_turns(
                [
                    NewTurn(
                        "http", "c", "private", "user", "message", "[ann]: hi", 5, "ann", "Ann"
                    ),
                    NewTurn("http", "c", "private", "assistant", "message", "hello", 2),
                ]
            )
            calls["usage: add one call"] = lambda: store.usage.add([spend])
            spent: dict[str, float] = {}
            for name, call in calls.items():
                for _ in range(repeat // 20):
                    await call()
                started = time.process_time()
                for _ in range(repeat):
                    await call()
                spent[name] = (time.process_time() - started) / repeat * 1e6
            return spent
        finally:
            await store.close()


def run_tree(root: Path, repeat: int) -> dict[str, float]:
    code = (
        f"import asyncio, json, sys; sys.path.insert(0, {str(root)!r}); "
        f"sys.path.insert(1, {str(ROOT)!r}); from bench.store_calls import measure; "
        f"print(json.dumps(asyncio.run(measure({repeat}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=root
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def checkout(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Storage calls' CPU (see module doc).")
    parser.add_argument("--before", default=None, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each tree")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        trees = [("this tree", ROOT)]
        if args.before:
            checkout(args.before, Path(folder))
            trees.append((args.before, Path(folder)))
        runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
        for number in range(args.rounds):
            for label, root in trees if number % 2 == 0 else trees[::-1]:
                runs[label].append(run_tree(root, CALLS))
    names = list(runs["this tree"][0])
    labels = list(runs)
    print("| call | " + " | ".join(f"{label}: µs CPU per call" for label in labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for name in names:
        cells = [min(run[name] for run in runs[label]) for label in labels]
        print(f"| {name} | " + " | ".join(f"{cell:,.0f}" for cell in cells) + " |")
    print(f"\nThe least of {args.rounds} runs of {CALLS:,} calls each, alternating the trees.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
