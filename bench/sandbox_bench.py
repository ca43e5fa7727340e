"""The sandbox (issue 47), per engine this machine can run: time from the tool call to its
result for `print(1)` (p50, p95), a pandas + matplotlib plot, and the daemon's RSS while
two runs go on at once.

The tool call is `Sandbox.run`, the handler `run_python` calls: the permission check,
the chat's folder, the engine's child process, the out/ files collected and sent, the
observation written. The daemon's RSS is this process's (the sandbox runs inside it as
in the daemon), sampled while two runs each fill 150 MB, beside the total RSS of its
child processes (where a run's memory is meant to be).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from core.admins import Admins  # noqa: E402
from core.messages import OutboundMessage  # noqa: E402
from core.sandbox.folders import ChatFolders  # noqa: E402
from core.sandbox.pick import pick_engine  # noqa: E402
from core.sandbox.run import RunLimits  # noqa: E402
from core.sandbox.service import Sandbox, SandboxRules  # noqa: E402
from core.sandbox.wasi import WasiEngine  # noqa: E402
from core.tools.registry import ToolContext  # noqa: E402
from tests.sandbox.support import WASI_CACHE  # noqa: E402

SECTION = "sandbox-bench"
OWNER = "telegram:1"
PLOT = """
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
frame = pd.DataFrame({"year": range(1, 21)})
frame["total"] = 100 * 1.05 ** frame["year"]
frame.plot(x="year", y="total")
plt.savefig("out/plot.png")
print(round(frame["total"].iloc[-1], 2))
"""
FILL = "block = bytearray(150 * 1024 * 1024)\nfor i in range(0, len(block), 4096): block[i] = 1\n"


def ctx(chat: str) -> ToolContext:
    return ToolContext.for_person("telegram", chat, "1", "Op", None)


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def descendants_rss_kib() -> int:
    """The RSS of every process below this one (a run's bwrap, its python, wasmtime)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    ours, grew = {int(Path("/proc/self").resolve().name)}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in ours} - ours
        ours |= more
        grew = bool(more)
    total = 0
    for pid in ours - {int(Path("/proc/self").resolve().name)}:
        try:
            total += rss_kib(pid)
        except OSError:
            continue
    return total


async def build(name: str, root: Path, cache: Path) -> tuple[Sandbox | None, str, str]:
    """The engine's sandbox (None and why when it cannot run here) and its warm-up."""
    picked = await pick_engine(name, root, cache)
    if picked.engine is None:
        return None, picked.why, ""
    warm = ""
    if isinstance(picked.engine, WasiEngine):
        started = time.perf_counter()
        ok = await picked.engine.warm(root / ".warm")
        took = time.perf_counter() - started
        warm = f"warm-up (a compile unless `wasi_cache` holds the module) {took:.1f} s"
        if not ok:
            return None, "the wasi engine did not start", warm
    owner = getattr(picked.engine, "run_as", None)
    folders = ChatFolders(root, keep_hours=24, owner=owner)
    limits = RunLimits(timeout_s=60, memory_mb=512, max_output_chars=4000)
    rules = SandboxRules(allow="admins", admins=Admins(frozenset({OWNER})), max_running=2)
    box = Sandbox(picked.engine, folders, limits, rules)

    async def send(message: OutboundMessage) -> bool:
        return True

    box.attach(send)
    return box, picked.why, warm


async def timed(box: Sandbox, code: str, chat: str) -> tuple[float, str, bool]:
    started = time.perf_counter()
    seen = await box.run(code, ctx(chat))
    return (time.perf_counter() - started) * 1000, seen.text, seen.ok


async def rss_during_two_runs(box: Sandbox) -> tuple[int, int, int, bool]:
    """This process's RSS before and at its peak, and its children's peak, over two runs
    at once that each fill 150 MB."""
    before = rss_kib()
    peak, children = before, 0
    runs = asyncio.gather(
        box.run(FILL + "print('a')", ctx("rss-a")), box.run(FILL + "print('b')", ctx("rss-b"))
    )
    task = asyncio.ensure_future(runs)
    while not task.done():
        peak = max(peak, rss_kib())
        children = max(children, await asyncio.to_thread(descendants_rss_kib))
        await asyncio.sleep(0.02)
    results = await task
    return before, peak, children, all(r.ok for r in results)


async def bench_engine(name: str, runs: int, cache: Path) -> str:
    with tempfile.TemporaryDirectory(prefix=f"sandbox-bench-{name}-") as tmp:
        root = Path(tmp) / "chats"
        box, why, warm = await build(name, root, cache)
        if box is None:
            return f"- **{name}**: cannot run here ({why})." + (f" {warm}." if warm else "")
        await timed(box, "print(1)", "warm")  # the engine's first run is not counted
        times = [(await timed(box, "print(1)", f"c{n % 4}"))[0] for n in range(runs)]
        p50 = statistics.median(times)
        p95 = sorted(times)[max(0, int(len(times) * 0.95) - 1)]
        plot_ms, plot_text, plot_ok = await timed(box, PLOT, "plot")
        if plot_ok and "plot.png (photo)" in plot_text:
            plot = f"pandas + matplotlib plot sent as a photo in {plot_ms:.0f} ms"
        else:
            last = [line for line in plot_text.splitlines() if line.strip()][-2:]
            plot = f"pandas + matplotlib plot failed ({' / '.join(last)[:160]})"
        before, peak, children, filled = await rss_during_two_runs(box)
        rss = (
            f"daemon RSS {before / 1024:.0f} MiB before, {peak / 1024:.0f} MiB at its peak while "
            f"2 runs filled 150 MB each ({'both ran' if filled else 'not both ran to the end'}); "
            f"the runs' processes peaked at {children / 1024:.0f} MiB together"
        )
        head = f"- **{name}** ({why}{'; ' + warm if warm else ''}):"
        return (
            f"{head} `print(1)` from tool call to result p50 **{p50:.0f} ms**, p95 {p95:.0f} ms "
            f"({runs} runs); {plot}; {rss}."
        )


async def main_async(engines: list[str], runs: int, cache: Path) -> str:
    lines = [await bench_engine(name, runs, cache) for name in engines]
    python = "the system's /usr/bin/python3 (bwrap runs it, with what the system has installed)"
    return (
        f"Sandbox (issue 47), `bench/sandbox_bench.py`; {python}. Goals: `print(1)` p50 "
        "≤ 150 ms on bwrap, ≤ 2 s on wasi after its first compile. "
        f"{cpu_model()}, load average {load_average()}.\n\n" + "\n".join(lines) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engines", default="bwrap,wasi")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--wasi-cache", type=Path, default=WASI_CACHE)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    text = asyncio.run(main_async(args.engines.split(","), args.runs, args.wasi_cache))
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
