"""Resident memory of the daemon: idle after its first turn, and after 300 turns in 100 chats.

Why: most people run a QQ or Telegram bot on a small VPS beside NapCat, which needs
several hundred MiB itself. This starts `chatterd run` as deployed (SQLite, the HTTP
channel only, the default exact tokenizer o200k_base, the fake model server in its own
process, as bench/turn_bench.py does), and reads the daemon's VmRSS and its
/proc/<pid>/smaps_rollup (anonymous vs file-backed) at three points: started, idle after
its first turn, idle after 300 turns in 100 chats. `--before DIR` also measures another
checkout (an earlier revision extracted with `git archive`) for a before/after pair.

    git archive a8ed476 | tar -x -C /tmp/before
    .venv/bin/python bench/memory_bench.py [--before /tmp/before] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from bench.turn_bench import DaemonProcess, FakeModelProcess, chat_bodies, drive  # noqa: E402

MIB = 1024 * 1024
IDLE_TARGET, LOADED_TARGET = 150, 170  # MiB


def rss(pid: int) -> dict[str, float]:
    """VmRSS and the smaps_rollup split, in MiB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            out["rss"] = int(line.split()[1]) / 1024
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Anonymous", "Rss"):
            out[name.lower()] = int(rest.split()[0]) / 1024
    out["file"] = out.get("rss", 0) - out.get("anonymous", 0)
    return out


async def settle(pid: int) -> dict[str, float]:
    """RSS once the daemon has been idle for a moment (background work done)."""
    await asyncio.sleep(3)
    return rss(pid)


async def measure(root: Path) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeModelProcess(0.0) as model:
            async with DaemonProcess(Path(tmp), model.base_url, root=root) as daemon:
                assert daemon.proc is not None
                pid = daemon.proc.pid
                started = await settle(pid)
                first = await drive(daemon.chat_url, chat_bodies(1, 1, "first"))
                assert first.answered == 1
                idle = await settle(pid)
                load = await drive(daemon.chat_url, chat_bodies(100, 3, "load"))
                assert load.answered == 300, f"answered {load.answered} of 300"
                loaded = await settle(pid)
    return {"started": started, "idle after the first turn": idle, "after 300 turns": loaded}


def render(
    points: dict[str, dict[str, float]],
    before: dict[str, dict[str, float]] | None,
    seconds: float,
    before_name: str = "a8ed476, the revision before issue 26",
) -> str:
    idle = points["idle after the first turn"]["rss"]
    loaded = points["after 300 turns"]["rss"]
    lines = [
        "## Daemon memory (bench/memory_bench.py)",
        "",
        "Command: `.venv/bin/python bench/memory_bench.py --before DIR` (DIR: `git archive "
        f"{before_name}`)  ",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {sys.version.split()[0]}; "
        f"run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds:.0f} s; load average "
        f"(1 min) {load_average()} at the end.",
        "",
        "`chatterd run` as deployed: SQLite, the HTTP channel only, the default exact "
        "tokenizer (o200k_base), the fake model server in its own process. Resident memory "
        "(VmRSS; anonymous and file-backed from /proc/<pid>/smaps_rollup) 3 s after each "
        "point. The load is 100 private chats, 3 turns each, sent at once.",
        "",
        "| revision | point | RSS MiB | anonymous MiB | file-backed MiB |",
        "|---|---|---:|---:|---:|",
    ]
    runs = [("before", before), ("this tree", points)] if before else [("this tree", points)]
    for label, run in runs:
        for name, p in (run or {}).items():
            lines.append(
                f"| {label} | {name} | {p['rss']:.0f} | {p['anonymous']:.0f} | {p['file']:.0f} |"
            )
    lines += [
        "",
        "| target | measured | result |",
        "|---|---|---|",
        f"| idle after its first turn ≤ {IDLE_TARGET} MiB | {idle:.0f} MiB | "
        f"**{'PASS' if idle <= IDLE_TARGET else 'FAIL'}** |",
        f"| after 300 turns in 100 chats ≤ {LOADED_TARGET} MiB | {loaded:.0f} MiB | "
        f"**{'PASS' if loaded <= LOADED_TARGET else 'FAIL'}** |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="an earlier source tree to measure too")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--before-name",
        default="a8ed476, the revision before issue 26",
        help="what --before holds, for the results' command line",
    )
    args = parser.parse_args()
    started = time.monotonic()
    before = asyncio.run(measure(args.before.resolve())) if args.before else None
    points = asyncio.run(measure(ROOT))
    text = render(points, before, time.monotonic() - started, args.before_name)
    print(text)
    if not args.no_write:
        write_section("memory-bench", text)


if __name__ == "__main__":
    main()
