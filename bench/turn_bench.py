"""Turn throughput and latency through the real HTTP channel, against a fake model.

Reference (same run, same client): a bare chat-completions round trip to the fake
OpenAI server. chatterd's figures are read against it, so the ratio is what we own:
HTTP parsing, dispatch, three storage round trips, context building, the SDK call.

Run: .venv/bin/python bench/turn_bench.py [--chats 50] [--turns 10] [--slow-chats 1000]
Writes bench/RESULTS.md (the turn section) unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.app import App  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.registry import ChannelDeps  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeModelProcess:
    """The fake OpenAI server in its own process, so it does not share our CPU time slice."""

    def __init__(self, latency_s: float) -> None:
        self.port = free_port()
        self.latency_s = latency_s
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeModelProcess:
        args = [sys.executable, "-m", "tests.fakes.openai_server", "--host", "127.0.0.1",
                "--port", str(self.port), "--reply", "ok, noted."]
        if self.latency_s:
            args += ["--latency", str(self.latency_s)]
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                try:
                    async with session.get(f"{self.base_url}/models") as resp:
                        if resp.status == 200:
                            return self
                except aiohttp.ClientError:
                    await asyncio.sleep(0.1)
        raise RuntimeError("fake model server did not start")

    async def __aexit__(self, *exc: object) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


async def drive(url: str, bodies: list[list[dict]], headers: dict[str, str] | None = None) -> tuple[float, list[float], int]:
    """Each inner list is one chat's messages, sent in order; chats run concurrently."""
    latencies: list[float] = []
    answered = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def one_chat(messages: list[dict]) -> None:
            nonlocal answered
            for body in messages:
                start = time.perf_counter()
                async with session.post(url, json=body, headers=headers) as resp:
                    data = await resp.json()
                    if resp.status == 200 and (data.get("reply") or data.get("choices")):
                        answered += 1
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(one_chat(chat) for chat in bodies))
        elapsed = time.perf_counter() - start
    return elapsed, latencies, answered


def settings_for(tmp: Path, model_url: str, port: int) -> Settings:
    os.environ.pop("CHATTERD_CONFIG", None)
    return Settings.model_validate(
        {
            "bot": {"workspace": str(tmp / "workspace")},
            "llm": {"base_url": model_url, "api_key": "sk-bench", "model": "fake-model",
                    "timeout_s": 120, "max_retries": 0},
            "storage": {"url": f"sqlite+aiosqlite:///{tmp}/bench.sqlite"},
            "http": {"port": port},
        }
    )


async def throughput(chats: int, turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        async with FakeModelProcess(latency_s=0) as model:
            port = free_port()
            settings = settings_for(tmp, model.base_url, port)
            bare_bodies = [
                [{"model": "fake-model", "messages": [{"role": "user", "content": f"hi {c}/{t}"}]}
                 for t in range(turns)]
                for c in range(chats)
            ]
            await drive(f"{model.base_url}/chat/completions", bare_bodies[:5])  # warm-up
            ref_elapsed, ref_lat, _ = await drive(f"{model.base_url}/chat/completions", bare_bodies)
            deps = ChannelDeps(settings, dict, sys.stdin, sys.stdout, "bench")
            async with App(settings, mode="run", deps=_no_console(deps)):
                bodies = [
                    [{"user_id": f"u{c}", "chat_id": f"c{c}", "chat_type": "private",
                      "sender_name": f"User {c}", "text": f"message {t} from chat {c}: 你好, how are you?"}
                     for t in range(turns)]
                    for c in range(chats)
                ]
                await drive(f"http://127.0.0.1:{port}/v1/chat", [b[:1] for b in bodies[:5]])  # warm-up
                elapsed, lat, answered = await drive(f"http://127.0.0.1:{port}/v1/chat", bodies)
    total = chats * turns
    return {
        "turns": total,
        "answered": answered,
        "turns_per_s": total / elapsed,
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": percentile(lat, 99) * 1000,
        "ref_per_s": total / ref_elapsed,
        "ref_p50_ms": statistics.median(ref_lat) * 1000,
        "ref_p99_ms": percentile(ref_lat, 99) * 1000,
    }


async def slow_model(chats: int, latency_s: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        async with FakeModelProcess(latency_s=latency_s) as model:
            port = free_port()
            settings = settings_for(tmp, model.base_url, port)
            deps = ChannelDeps(settings, dict, sys.stdin, sys.stdout, "bench")
            async with App(settings, mode="run", deps=_no_console(deps)) as app:
                bodies = [[{"user_id": f"u{c}", "chat_id": f"c{c}", "chat_type": "private",
                            "sender_name": f"U{c}", "text": "are you there?"}] for c in range(chats)]
                elapsed, lat, answered = await drive(f"http://127.0.0.1:{port}/v1/chat", bodies)
                stored = 0
                assert app.storage is not None
                for c in range(chats):
                    stored += len(await app.storage.recent_turns("http", f"c{c}", 10))
    return {"chats": chats, "answered": answered, "stored_turns": stored, "elapsed_s": elapsed,
            "p50_s": statistics.median(lat), "max_s": max(lat)}


def _no_console(deps: ChannelDeps) -> ChannelDeps:
    class NotATerminal:
        def isatty(self) -> bool:
            return False

    return ChannelDeps(deps.settings, deps.health_source, NotATerminal(), deps.console_out, "bench")  # type: ignore[arg-type]


def render(fast: dict[str, float], slow: dict[str, float] | None) -> str:
    overhead = fast["p50_ms"] / fast["ref_p50_ms"]
    lines = [
        "## Turn benchmark (bench/turn_bench.py)",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, SQLite (WAL), "
        f"fake model in its own process answering at once; HTTP channel on loopback; "
        f"{int(fast['turns'])} turns over concurrent chats.",
        "",
        "| run | turns/s | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
        f"| reference: bare round trip to the fake model | {fast['ref_per_s']:.0f} | {fast['ref_p50_ms']:.2f} | {fast['ref_p99_ms']:.2f} |",
        f"| chatterd: full turn through HTTP channel | {fast['turns_per_s']:.0f} | {fast['p50_ms']:.2f} | {fast['p99_ms']:.2f} |",
        "",
        f"p50 ratio chatterd / reference: **{overhead:.2f}x** (target <= 3x); throughput "
        f"{fast['turns_per_s']:.0f} turns/s (target >= 200); answered {int(fast['answered'])}/{int(fast['turns'])}.",
    ]
    if slow:
        lines += [
            "",
            f"1 s model, {int(slow['chats'])} chats in flight at once: answered {int(slow['answered'])}, "
            f"stored turns {int(slow['stored_turns'])} (2 per chat expected), wall {slow['elapsed_s']:.1f} s, "
            f"p50 {slow['p50_s']:.2f} s, slowest {slow['max_s']:.2f} s.",
        ]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path) -> None:
    marker_start, marker_end = "<!-- turn-bench -->", "<!-- /turn-bench -->"
    block = f"{marker_start}\n{text}{marker_end}\n"
    current = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\n"
    if marker_start in current:
        head, rest = current.split(marker_start, 1)
        current = head + block + rest.split(marker_end, 1)[1].lstrip("\n")
    else:
        current = current.rstrip("\n") + "\n\n" + block
    path.write_text(current, encoding="utf-8")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--slow-chats", type=int, default=1000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    fast = await throughput(args.chats, args.turns)
    slow = await slow_model(args.slow_chats, 1.0) if args.slow_chats else None
    text = render(fast, slow)
    print(text)
    if not args.no_write:
        write_section(text, Path(__file__).parent / "RESULTS.md")


if __name__ == "__main__":
    asyncio.run(main())
