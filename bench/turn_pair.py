"""Turn throughput of this tree against another revision, run in alternation.

Why paired: on a shared 2-core machine the turn bench's turns/s moves by a fifth from
one minute to the next with what else runs, so a change is judged against the code
before it measured in the same minutes: the same client, fake model process and
workload as bench/turn_bench.py's throughput run, the two daemons taking turns (A B B A
...). Beside turns/s, each run reads the daemon's CPU time per turn from /proc (its
event-loop thread and its other threads apart), which a busy machine disturbs much
less than wall time.

Run: .venv/bin/python bench/turn_pair.py [--against main] [--rounds 4] [--no-write]
The other revision is taken with `git archive` into a temporary folder and run from
there with this venv (its dependencies must match). Writes the turn-pair section of
bench/RESULTS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from bench.turn_bench import (  # noqa: E402
    TARGET_TURNS_PER_S,
    DaemonProcess,
    FakeModelProcess,
    chat_bodies,
    drive,
    round_robin,
)

SECTION = "turn-pair"


@dataclass
class PairRun:
    """One throughput run of one tree."""

    label: str
    per_s: float
    answered: int
    sent: int
    main_ms: float | None  # the daemon's event-loop thread, CPU ms per turn
    other_ms: float | None  # its other threads (SQLite work), CPU ms per turn
    p50_ms: float  # one turn at a time (turn_bench's latency run), median


def thread_cpu_s(pid: int) -> tuple[float, float] | None:
    """CPU seconds of a process's main thread and of its other threads (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    main = other = 0.0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            used = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            if task == str(pid):
                main += used
            else:
                other += used
    except OSError:
        return None
    return main, other


async def one_run(label: str, root: Path, model_url: str, chats: int, turns: int) -> PairRun:
    with tempfile.TemporaryDirectory() as folder:
        async with DaemonProcess(Path(folder), model_url, root=root) as daemon:
            assert daemon.proc is not None
            await drive(daemon.chat_url, chat_bodies(10, 3, "warm"))
            before = thread_cpu_s(daemon.proc.pid)
            run = await drive(daemon.chat_url, chat_bodies(chats, turns, "tp"))
            after = thread_cpu_s(daemon.proc.pid)
            # The latency the SDK ratio is about: one request at a time, no queue.
            alone = await drive(daemon.chat_url, round_robin(chat_bodies(20, 10, "lat")))
    main_ms = other_ms = None
    if before is not None and after is not None:
        main_ms = (after[0] - before[0]) * 1000 / run.sent
        other_ms = (after[1] - before[1]) * 1000 / run.sent
    return PairRun(label, run.per_s, run.answered, run.sent, main_ms, other_ms, alone.p50_ms)


def checkout(rev: str, into: Path) -> str:
    """The tree at `rev` extracted into `into`; returns the commit's short name."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    named = ["git", "-C", str(ROOT), "rev-parse", "--short", rev]
    return subprocess.run(named, check=True, capture_output=True, text=True).stdout.strip()


def this_tree() -> str:
    """ "this tree (<commit>)", with a + when it has uncommitted changes."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    mark = "+" if dirty.stdout.strip() else ""
    return f"this tree ({head.stdout.strip()}{mark})"


async def pair(rev: str, rounds: int, chats: int, turns: int) -> tuple[list[PairRun], str]:
    with tempfile.TemporaryDirectory() as folder:
        other = Path(folder)
        commit = checkout(rev, other)
        trees = [(this_tree(), ROOT), (f"{rev} ({commit})", other)]
        runs: list[PairRun] = []
        async with FakeModelProcess(latency_s=0) as model:
            for number in range(rounds):
                order = trees if number % 2 == 0 else trees[::-1]
                for label, root in order:
                    run = await one_run(label, root, model.base_url, chats, turns)
                    runs.append(run)
                    print(f"{label:>24}: {run.per_s:6.0f} turns/s  {_cpu(run)}", flush=True)
        return runs, f"{rev} ({commit})"


def _cpu(run: PairRun) -> str:
    if run.main_ms is None or run.other_ms is None:
        return "CPU n/a"
    total = run.main_ms + run.other_ms
    return (
        f"CPU {total:.2f} ms/turn (loop {run.main_ms:.2f}, other threads "
        f"{run.other_ms:.2f}); p50 alone {run.p50_ms:.2f} ms"
    )


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render(runs: list[PairRun], other: str, rounds: int, chats: int, turns: int) -> str:
    labels = [runs[0].label if runs[0].label != other else runs[1].label, other]
    rows = []
    medians: dict[str, tuple[float, float | None]] = {}
    for label in labels:
        mine = [r for r in runs if r.label == label]
        per_s = statistics.median(r.per_s for r in mine)
        main = _median([r.main_ms for r in mine])
        rest = _median([r.other_ms for r in mine])
        total = main + rest if main is not None and rest is not None else None
        p50 = statistics.median(r.p50_ms for r in mine)
        medians[label] = (per_s, total)
        each = ", ".join(f"{r.per_s:.0f}" for r in mine)
        answered = sum(r.answered for r in mine)
        sent = sum(r.sent for r in mine)
        rows.append(
            f"| {label} | {per_s:,.0f} ({each}) | {_ms(total)} | {_ms(main)} | {_ms(rest)} "
            f"| {p50:.2f} | {answered:,}/{sent:,} |"
        )
    (ours, our_cpu), (theirs, their_cpu) = medians[labels[0]], medians[other]
    cpu_line = ""
    if our_cpu is not None and their_cpu is not None:
        cpu_line = f" and {our_cpu / their_cpu:.2f}x the daemon CPU per turn"
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "## Turn throughput, paired with an earlier revision (bench/turn_pair.py)\n\n"
        f"Command: `.venv/bin/python bench/turn_pair.py --against {other.split()[0]} "
        f"--rounds {rounds}`  \n"
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}); run {when}; load average (1 min) "
        f"{load_average()} at the end.\n\n"
        f"bench/turn_bench.py's throughput run ({chats} chats at once, {turns} turns each, "
        "HTTP channel, SQLite, one fake model process answering at once), once per tree per "
        f"round for {rounds} rounds, the order alternating (A B, B A, ...). CPU is the "
        "daemon's, per turn, from /proc: its event-loop thread and its other threads (SQLite "
        "runs in worker threads). *p50 alone*: after it, 200 turns one at a time over 20 "
        "chats (turn_bench's latency run), their median latency. Medians of the runs; "
        "every run's turns/s in brackets.\n\n"
        "| daemon | turns/s | CPU ms/turn | event loop | other threads | p50 alone ms "
        "| answered |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"This tree: {ours / theirs:.2f}x the turns/s of {other}{cpu_line}; target "
        f"≥ {TARGET_TURNS_PER_S:g} turns/s.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Paired turn throughput (see module doc).")
    parser.add_argument("--against", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=4, help="runs of each tree")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    runs, other = asyncio.run(pair(args.against, args.rounds, args.chats, args.turns))
    text = render(runs, other, args.rounds, args.chats, args.turns)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
        print("wrote bench/RESULTS.md (turn-pair section)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
