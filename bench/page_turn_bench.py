"""One turn that shares three 4.9 MB pages: its wall time and the memory it costs (issue 44).

Why: the hostile day asked that any one shared page cost at most 300 MiB at the peak,
counting the daemon and its parse children together, and the turn answer within 20 s.
This starts `chatterd run` as deployed (bench/turn_bench.py's DaemonProcess, SQLite,
the HTTP channel, the fake model in its own process), serves tests/fakes/page_server.py's
4.9 MB page on loopback, posts one `/v1/chat` message with three links to it, and samples
the resident memory (VmRSS) of the daemon and of every process below it every 20 ms.
`--before DIR` measures another checkout (`git archive`) in the same run.

    mkdir DIR && git archive main | tar -x -C DIR
    .venv/bin/python bench/page_turn_bench.py [--before DIR] [--no-write]
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
from bench.turn_bench import DaemonProcess, FakeModelProcess, drive  # noqa: E402
from tests.fakes.page_server import PageServer  # noqa: E402

MEMORY_TARGET_MIB, WALL_TARGET_S = 300, 20.0


class LinkDaemon(DaemonProcess):
    """The bench daemon, allowed to read pages from loopback."""

    def config(self) -> str:
        return super().config() + '[links]\nallow_hosts = ["127.0.0.1"]\n'


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it (the parse children, the embedded model if any)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            kids = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo.extend(int(k) for k in kids)
    return found


async def _sample(pid: int, peak: dict[str, float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        tree = _tree(pid)
        total = sum(_rss_mib(p) for p in tree)
        peak["total"] = max(peak.get("total", 0.0), total)
        peak["children"] = max(peak.get("children", 0.0), len(tree) - 1)
        await asyncio.sleep(0.02)


async def measure(root: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with PageServer() as pages, FakeModelProcess(0.0) as model:
            async with LinkDaemon(Path(tmp), model.base_url, root=root) as daemon:
                assert daemon.proc is not None
                pid = daemon.proc.pid
                warm = await drive(daemon.chat_url, [[_body("hello")]])
                assert warm.answered == 1
                await asyncio.sleep(3)
                idle = sum(_rss_mib(p) for p in _tree(pid))
                links = " ".join(f"http://127.0.0.1:{pages.port}/heavy?copy={n}" for n in range(3))
                peak: dict[str, float] = {}
                stop = asyncio.Event()
                sampler = asyncio.create_task(_sample(pid, peak, stop))
                started = time.monotonic()
                run = await drive(daemon.chat_url, [[_body(f"what do these say? {links}")]])
                wall = time.monotonic() - started
                stop.set()
                await sampler
                assert run.answered == 1, "the turn was not answered"
    return {
        "idle": idle,
        "peak": peak["total"],
        "above": peak["total"] - idle,
        "children": peak["children"],
        "wall": wall,
    }


def _body(text: str) -> dict[str, str]:
    return {"user_id": "pages", "chat_type": "private", "sender_name": "Reader", "text": text}


def render(points: dict[str, dict[str, float]], seconds: float, before_name: str) -> str:
    now = points["this tree"]
    lines = [
        "## Three shared 4.9 MB pages in one turn (bench/page_turn_bench.py)",
        "",
        f"Command: `.venv/bin/python bench/page_turn_bench.py --before DIR` (DIR: `git archive "
        f"{before_name}`)  ",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {sys.version.split()[0]}; "
        f"run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds:.0f} s; load average "
        f"(1 min) {load_average()} at the end.",
        "",
        "`chatterd run` (SQLite, the HTTP channel, the fake model in its own process) gets "
        "one `/v1/chat` message with three links to the fake page server's 4.9 MB article. "
        "Memory is the summed VmRSS of the daemon and every process below it, sampled "
        "every 20 ms; idle is the same sum 3 s after a first plain turn.",
        "",
        "| revision | idle MiB | peak MiB | above idle MiB | processes below at once | turn s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, p in points.items():
        lines.append(
            f"| {label} | {p['idle']:.0f} | {p['peak']:.0f} | {p['above']:.0f} | "
            f"{p['children']:.0f} | {p['wall']:.1f} |"
        )
    lines += [
        "",
        "| target | measured | result |",
        "|---|---|---|",
        f"| daemon and children ≤ {MEMORY_TARGET_MIB} MiB above idle | {now['above']:.0f} MiB "
        f"| **{'PASS' if now['above'] <= MEMORY_TARGET_MIB else 'FAIL'}** |",
        f"| the turn answers within {WALL_TARGET_S:.0f} s | {now['wall']:.1f} s | "
        f"**{'PASS' if now['wall'] <= WALL_TARGET_S else 'FAIL'}** |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="an earlier source tree to measure too")
    parser.add_argument("--before-name", default="main before issue 44", help="what it holds")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    started = time.monotonic()
    points: dict[str, dict[str, float]] = {}
    if args.before:
        points["before"] = asyncio.run(measure(args.before.resolve()))
    points["this tree"] = asyncio.run(measure(ROOT))
    text = render(points, time.monotonic() - started, args.before_name)
    print(text)
    if not args.no_write:
        write_section("page-turn-bench", text)


if __name__ == "__main__":
    main()
