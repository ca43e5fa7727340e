"""Turn throughput and latency through the real HTTP channel, against a fake model.

Three processes, as deployed: this one is the client; `chatterd run` (HTTP channel,
SQLite) is the daemon; the fake OpenAI server (tests/fakes/openai_server.py) is the
model. References (same run, same client, same fake model): a bare chat-completions
round trip with the benchmark's HTTP client, and the same round trip through the
`openai` SDK that chatterd itself uses. chatterd's figures are read against them, so the
ratio is what we own: HTTP parsing, dispatch, storage round trips, context building and
the SDK call.

- latency: one request at a time (no queueing), p50 and p99;
- throughput: many chats at once, several turns each, sent back to back;
- slow model: 1,000 chats at once against a model that answers after 1 s.

Run: .venv/bin/python bench/turn_bench.py [--quick] [--no-write]
     [--chats 100] [--turns 20] [--latency-turns 300] [--slow-chats 1000]
Writes bench/RESULTS.md (the turn section) unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from memory.turns.store import open_storage  # noqa: E402

MODEL = "fake-model"
# Targets (from the issue).
TARGET_TURNS_PER_S = 200.0
TARGET_P50_RATIO = 3.0
TARGET_SLOW_WALL_S = 1_000.0  # what one chat after another would take with a 1 s model
IDEAL_SLOW_WALL_S = 5.0  # "a few seconds"
# Issue 45's goals for one process: a turn's latency against the openai SDK's round trip
# alone, turns/s, and the slow run's wall against its floor (every chat waits for the
# model once; max_in_flight of them at a time).
GOAL_SDK_RATIO = 2.0
GOAL_TURNS_PER_S = 300.0
GOAL_FLOOR_RATIO = 1.5
DEFAULT_IN_FLIGHT = 64  # [bot] max_in_flight's default
WIDE_IN_FLIGHT = 256  # the same run with the bound raised (SQLite; no lock connections)
# Environment variables the daemon honours; the bench's config must not be overridden.
_ENV_PREFIXES = ("CHATTERD_", "OPENAI_", "TELEGRAM_")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}


async def wait_http(url: str, proc: asyncio.subprocess.Process, what: str) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode} before answering")
            try:
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url} within 60 s")


async def stop_process(proc: asyncio.subprocess.Process | None) -> None:
    if proc is None or proc.returncode is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 40)
    except TimeoutError:
        proc.kill()
        await proc.wait()


class FakeModelProcess:
    """The fake OpenAI server in its own process, so it does not share our CPU time slice."""

    def __init__(self, latency_s: float) -> None:
        self.port = free_port()
        self.latency_s = latency_s
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeModelProcess:
        args = ["-m", "tests.fakes.openai_server", "--host", "127.0.0.1"]
        args += ["--port", str(self.port), "--reply", "ok, noted."]
        if self.latency_s:
            args += ["--latency", str(self.latency_s)]
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            cwd=ROOT,
            env=child_env(),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await wait_http(f"{self.base_url}/models", self.proc, "fake model server")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_process(self.proc)


class DaemonProcess:
    """`chatterd run` with only the HTTP channel, SQLite in `tmp`, the fake model as LLM.

    `root` is the source tree the daemon runs from (another checkout, for paired runs).
    """

    def __init__(
        self, tmp: Path, model_url: str, max_in_flight: int | None = None, root: Path = ROOT
    ) -> None:
        self.tmp = tmp
        self.root = root
        self.max_in_flight = max_in_flight
        self.port = free_port()
        self.db_url = f"sqlite+aiosqlite:///{tmp}/bench.sqlite"
        self.model_url = model_url
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def chat_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat"

    def config(self) -> str:
        return "\n".join(
            [
                "[bot]",
                f'workspace = "{self.tmp / "workspace"}"',
                "rate_limit_per_min = 0",  # one bench user sends hundreds a minute
                *([f"max_in_flight = {self.max_in_flight}"] if self.max_in_flight else []),
                "[llm]",
                f'base_url = "{self.model_url}"',
                'api_key = "sk-bench"',
                f'model = "{MODEL}"',
                "timeout_s = 120",
                "max_retries = 0",
                "[storage]",
                f'url = "{self.db_url}"',
                "[http]",
                "enabled = true",
                'host = "127.0.0.1"',
                f"port = {self.port}",
                "max_connections = 4096",  # the slow run holds 1,000 connections at once
                "",
            ]
        )

    async def __aenter__(self) -> DaemonProcess:
        path = self.tmp / "config.toml"
        path.write_text(self.config(), encoding="utf-8")
        self.log = (self.tmp / "daemon.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.cli",
            "--config",
            str(path),
            "--log-level",
            "WARNING",
            "run",
            cwd=self.tmp,
            env={**child_env(), "PYTHONPATH": str(self.root)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
        )
        try:
            await wait_http(f"http://127.0.0.1:{self.port}/healthz", self.proc, "chatterd")
        except RuntimeError:
            await stop_process(self.proc)
            self.log.close()
            tail = (self.tmp / "daemon.log").read_text(errors="replace")[-3000:]
            print(f"chatterd log:\n{tail}", file=sys.stderr)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_process(self.proc)
        self.log.close()


@dataclass
class Run:
    """One client run: per-request latencies, wall time, answers."""

    latencies: list[float]
    elapsed: float
    sent: int
    answered: int

    @property
    def per_s(self) -> float:
        return self.sent / self.elapsed

    def pct(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1e3

    @property
    def p99_ms(self) -> float:
        return self.pct(99) * 1e3


async def drive(url: str, chats: Sequence[Sequence[dict[str, Any]]]) -> Run:
    """Each inner list is one chat's requests, sent in order; chats run concurrently."""
    latencies: list[float] = []
    answered = 0
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one_chat(bodies: Sequence[dict[str, Any]]) -> None:
            nonlocal answered
            for body in bodies:
                start = time.perf_counter()
                async with session.post(url, json=body) as resp:
                    data = await resp.json()
                    if resp.status == 200 and (data.get("reply") or data.get("choices")):
                        answered += 1
                latencies.append(time.perf_counter() - start)

        start = time.perf_counter()
        await asyncio.gather(*(one_chat(chat) for chat in chats))
        elapsed = time.perf_counter() - start
    return Run(latencies, elapsed, sum(len(c) for c in chats), answered)


async def drive_sdk(base_url: str, count: int) -> Run:
    """Sequential chat completions through the openai SDK (the client chatterd uses)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    latencies = []
    start = time.perf_counter()
    try:
        for i in range(count):
            t0 = time.perf_counter()
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"hi {i}"}]
            )
            latencies.append(time.perf_counter() - t0)
    finally:
        await client.close()
    return Run(latencies, time.perf_counter() - start, count, count)


def bare_bodies(chats: int, turns: int, tag: str) -> list[list[dict[str, Any]]]:
    return [
        [
            {"model": MODEL, "messages": [{"role": "user", "content": f"{tag} {c}/{t}"}]}
            for t in range(turns)
        ]
        for c in range(chats)
    ]


def chat_bodies(chats: int, turns: int, tag: str) -> list[list[dict[str, Any]]]:
    return [
        [
            {
                "user_id": f"{tag}-u{c}",
                "chat_id": f"{tag}-u{c}",  # a private chat is its user's (issue 24)
                "chat_type": "private",
                "sender_name": f"User {c}",
                "text": f"message {t} from chat {c}: 你好, how are you?",
            }
            for t in range(turns)
        ]
        for c in range(chats)
    ]


def round_robin(bodies: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """All requests as one sequence (one at a time), interleaving the chats."""
    flat = [chat[t] for t in range(max(map(len, bodies))) for chat in bodies if t < len(chat)]
    return [flat]


@dataclass
class FastResults:
    bare_lat: Run
    sdk_lat: Run
    ours_lat: Run
    bare_tp: Run
    ours_tp: Run
    chats: int
    turns: int


async def fast_model(tmp: Path, chats: int, turns: int, latency_turns: int) -> FastResults:
    """Latency (one request at a time) and throughput (many chats at once), instant model."""
    lat_chats = 20
    lat_turns = max(1, latency_turns // lat_chats)
    async with FakeModelProcess(latency_s=0) as model:
        completions = f"{model.base_url}/chat/completions"
        await drive(completions, round_robin(bare_bodies(5, 10, "warm")))
        bare_lat = await drive(completions, round_robin(bare_bodies(lat_chats, lat_turns, "lat")))
        await drive_sdk(model.base_url, 20)  # warm-up
        sdk_lat = await drive_sdk(model.base_url, lat_chats * lat_turns)
        bare_tp = await drive(completions, bare_bodies(chats, turns, "tp"))
        async with DaemonProcess(tmp, model.base_url) as daemon:
            await drive(daemon.chat_url, chat_bodies(10, 3, "warm"))
            ours_lat = await drive(
                daemon.chat_url, round_robin(chat_bodies(lat_chats, lat_turns, "lat"))
            )
            ours_tp = await drive(daemon.chat_url, chat_bodies(chats, turns, "tp"))
    return FastResults(bare_lat, sdk_lat, ours_lat, bare_tp, ours_tp, chats, turns)


@dataclass
class SlowResults:
    run: Run
    stored_turns: int
    latency_s: float
    max_in_flight: int


async def slow_model(
    tmp: Path, chats: int, latency_s: float, max_in_flight: int = DEFAULT_IN_FLIGHT
) -> SlowResults:
    """`chats` chats send one message each, all at once, to a model that takes latency_s."""
    bodies = chat_bodies(chats, 1, "slow")
    async with FakeModelProcess(latency_s=latency_s) as model:
        async with DaemonProcess(tmp, model.base_url, max_in_flight) as daemon:
            run = await drive(daemon.chat_url, bodies)
        storage = await open_storage(daemon.db_url, migrate=False)
        try:
            stored = 0
            for [body] in bodies:  # a private chat is stored under its user's id
                stored += len(await storage.recent_turns("http", body["user_id"], 10))
        finally:
            await storage.close()
    return SlowResults(run, stored, latency_s, max_in_flight)


# -- reporting --------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def render(fast: FastResults, slows: list[SlowResults], command: str, elapsed: float) -> str:
    ratio = fast.ours_lat.p50_ms / fast.bare_lat.p50_ms
    sdk_ratio = fast.sdk_lat.p50_ms / fast.bare_lat.p50_ms
    tp = fast.ours_tp
    lines = [
        "## Turn benchmark (bench/turn_bench.py)",
        "",
        f"Command: `{command}`  ",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
        f"{platform.machine()}, Python {platform.python_version()}; run "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {elapsed:.0f} s in all; load average "
        f"(1 min) {load_average()} at the end.",
        "",
        "Three processes on this machine: the client (this script, aiohttp), the daemon "
        "(`chatterd run`, HTTP channel only, SQLite in WAL mode, default settings but "
        "rate_limit_per_min = 0) and the "
        "fake OpenAI model server (tests/fakes/openai_server.py) answering at once. Every "
        "chatterd turn stores the user turn, reads the chat's history and the sender's "
        "memories, builds the context, calls the model through the openai SDK and stores the "
        "answer. *Latency*: one request at a time, "
        f"{len(fast.ours_lat.latencies)} turns round-robin over 20 chats. *Throughput*: "
        f"{fast.chats:,} chats at once, {fast.turns} turns each, each chat's next message "
        "sent as soon as its answer arrives.",
        "",
        "### Targets",
        "",
        "| target | measured | result |",
        "|---|---|---|",
        f"| ≥ {TARGET_TURNS_PER_S:g} turns/s sustained through the HTTP channel (SQLite, "
        f"instant model) | {tp.per_s:,.0f} turns/s ({tp.sent:,} turns in {tp.elapsed:.1f} s, "
        f"answered {tp.answered:,}) | {verdict(tp.per_s >= TARGET_TURNS_PER_S)} |",
        f"| p50 turn latency ≤ {TARGET_P50_RATIO:g}x the bare chat-completions round trip | "
        f"{ratio:.1f}x ({fast.ours_lat.p50_ms:.2f} vs {fast.bare_lat.p50_ms:.2f} ms; the "
        f"openai SDK round trip alone is {sdk_ratio:.1f}x) | "
        f"{verdict(ratio <= TARGET_P50_RATIO)} |",
    ]
    for slow in slows:
        run = slow.run
        ok = run.answered == run.sent and slow.stored_turns == 2 * run.sent
        lines += [
            f"| {run.sent:,} chats at once, {slow.latency_s:g} s model, `max_in_flight = "
            f"{slow.max_in_flight}`: all answered and stored, wall well under "
            f"{TARGET_SLOW_WALL_S:,.0f} s (≤ 1/10 of it) | "
            f"{run.elapsed:.1f} s wall, answered {run.answered:,}/{run.sent:,}, stored "
            f"{slow.stored_turns:,}/{2 * run.sent:,} turns | "
            f"{verdict(ok and run.elapsed < TARGET_SLOW_WALL_S / 10)} |",
        ]
    if slows:
        best = min(slows, key=lambda s: s.run.elapsed)
        lines.append(
            f"| same, ideally a few seconds (≤ {IDEAL_SLOW_WALL_S:g} s) | {best.run.elapsed:.1f} s "
            f"with `max_in_flight = {best.max_in_flight}` | "
            f"{verdict(best.run.elapsed <= IDEAL_SLOW_WALL_S)} |"
        )
    lines += _goals(fast, slows)
    lines += [
        "",
        "### Measurements",
        "",
        "| run | requests | req/s | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
        _row("latency, reference: bare round trip (aiohttp)", fast.bare_lat),
        _row("latency, reference: round trip through the openai SDK", fast.sdk_lat),
        _row("latency, chatterd: full turn through the HTTP channel", fast.ours_lat),
        _row("throughput, reference: bare round trips, concurrent chats", fast.bare_tp),
        _row("throughput, chatterd: full turns, concurrent chats", fast.ours_tp),
    ]
    for slow in slows:
        name = f"{slow.run.sent:,} chats at once, {slow.latency_s:g} s model, "
        lines.append(_row(name + f"max_in_flight {slow.max_in_flight}", slow.run))
    lines += [
        "",
        f"Throughput runs: {_shape(fast.ours_tp)}. Ratios: chatterd p50 latency / bare "
        f"{ratio:.1f}x, / SDK {fast.ours_lat.p50_ms / fast.sdk_lat.p50_ms:.1f}x; chatterd "
        f"throughput / bare {tp.per_s / fast.bare_tp.per_s:.2f}x.",
    ]
    return "\n".join(lines) + "\n"


def floor_s(slow: SlowResults) -> float:
    """The slow run's least possible wall: rounds of max_in_flight chats, one model wait each."""
    return -(-slow.run.sent // slow.max_in_flight) * slow.latency_s


def _goals(fast: FastResults, slows: list[SlowResults]) -> list[str]:
    """Issue 45's rows: the turn's own cost, read against the references it cannot beat."""
    sdk_ratio = fast.ours_lat.p50_ms / fast.sdk_lat.p50_ms
    tp = fast.ours_tp.per_s
    rows = [
        f"| issue 45: p50 turn latency ≤ {GOAL_SDK_RATIO:g}x the openai SDK round trip alone | "
        f"{sdk_ratio:.1f}x ({fast.ours_lat.p50_ms:.2f} vs {fast.sdk_lat.p50_ms:.2f} ms) | "
        f"{verdict(sdk_ratio <= GOAL_SDK_RATIO)} |",
        f"| issue 45: ≥ {GOAL_TURNS_PER_S:g} turns/s (as the first row) | {tp:,.0f} turns/s | "
        f"{verdict(tp >= GOAL_TURNS_PER_S)} |",
    ]
    for slow in slows:
        if slow.max_in_flight != WIDE_IN_FLIGHT:
            continue
        ratio = slow.run.elapsed / floor_s(slow)
        rows.append(
            f"| issue 45: {slow.run.sent:,} chats at once, `max_in_flight = "
            f"{slow.max_in_flight}`, ≤ {GOAL_FLOOR_RATIO:g}x the floor ({floor_s(slow):g} s) | "
            f"{ratio:.1f}x ({slow.run.elapsed:.1f} s) | {verdict(ratio <= GOAL_FLOOR_RATIO)} |"
        )
    return rows


def _row(name: str, run: Run) -> str:
    return f"| {name} | {run.sent:,} | {run.per_s:,.0f} | {run.p50_ms:,.2f} | {run.p99_ms:,.2f} |"


def _shape(run: Run) -> str:
    return f"{run.sent:,} requests in {run.elapsed:.2f} s"


async def run_all(
    chats: int, turns: int, latency_turns: int, slow_chats: int
) -> tuple[FastResults, list[SlowResults]]:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as fast_dir:
        fast = await fast_model(Path(fast_dir), chats, turns, latency_turns)
    print(f"instant model runs done in {time.perf_counter() - started:.0f} s", flush=True)
    slows: list[SlowResults] = []
    for in_flight in (DEFAULT_IN_FLIGHT, WIDE_IN_FLIGHT) if slow_chats else ():
        with tempfile.TemporaryDirectory() as slow_dir:
            slows.append(await slow_model(Path(slow_dir), slow_chats, 1.0, in_flight))
    return fast, slows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Turn throughput and latency (see module doc).")
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument("--chats", type=int, default=None, help="throughput: chats at once")
    parser.add_argument("--turns", type=int, default=None, help="throughput: turns per chat")
    parser.add_argument("--latency-turns", type=int, default=None)
    parser.add_argument("--slow-chats", type=int, default=None, help="0 skips the slow run")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    chats = args.chats or (20 if args.quick else 100)
    turns = args.turns or (5 if args.quick else 20)
    latency_turns = args.latency_turns or (100 if args.quick else 400)
    slow_chats = args.slow_chats if args.slow_chats is not None else (200 if args.quick else 1000)
    command = ".venv/bin/python bench/turn_bench.py" + "".join(
        f" {a}" for a in (sys.argv[1:] if argv is None else argv)
    )
    started = time.perf_counter()
    fast, slows = asyncio.run(run_all(chats, turns, latency_turns, slow_chats))
    text = render(fast, slows, command, time.perf_counter() - started)
    print(text)
    if not args.no_write:
        write_section("turn-bench", text)
        print("wrote bench/RESULTS.md (turn section)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
