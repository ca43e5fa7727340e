"""The real `chatterd run` process for fault tests: started, killed, restarted.

Why a real process: "nothing accepted is lost" is a promise about SIGKILL, container
restarts and power cuts, which no in-process test can imitate. The fakes (Telegram,
OneBot, OpenAI) run in the test process; the daemon talks to them on loopback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Blackhole:
    """A TCP server that accepts connections and never answers (a hung search proxy)."""

    def __init__(self) -> None:
        self.connections = 0
        self.connected = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Blackhole:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        self.connected.set()


class Daemon:
    """One `chatterd run` child process with its own log file."""

    def __init__(self, env: Mapping[str, str], log_path: Path, http_port: int) -> None:
        self.env = dict(env)
        self.log_path = log_path
        self.http_port = http_port
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    async def start(self, within_s: float = 30.0) -> Daemon:
        """Spawn and wait until /healthz answers (every channel started)."""
        with self.log_path.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot.cli",
                "run",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                cwd=str(ROOT),
            )
        await self._wait_ready(within_s)
        return self

    async def _wait_ready(self, within_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + within_s
        async with aiohttp.ClientSession() as session:
            while True:
                assert self.proc is not None
                if self.proc.returncode is not None:
                    raise AssertionError(f"daemon exited early:\n{self.log()}")
                try:
                    async with session.get(f"{self.base_url}/healthz") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"daemon not ready in {within_s}s:\n{self.log()}")
                await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: what an OOM kill, `systemctl kill` or a power cut does."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)

    async def wait(self, within_s: float = 30.0) -> int:
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), within_s)

    async def terminate(self, within_s: float = 30.0) -> int:
        """SIGTERM and wait for the drain to finish."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await self.wait(within_s)

    async def health(self) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{self.base_url}/healthz") as response:
                return dict(await response.json())

    async def post_chat(self, body: dict[str, Any], within_s: float = 30.0) -> tuple[int, Any]:
        timeout = aiohttp.ClientTimeout(total=within_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(f"{self.base_url}/v1/chat", json=body) as response:
                return response.status, await response.json()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def close(self) -> None:
        self.kill()
        if self.proc is not None:
            await self.wait()


# Two replicas of one PostgreSQL database at once: sized so both fit a default server
# (max_connections 100), since a replica now counts the others before it starts.
TWO_REPLICAS = {"CHATTERD_STORAGE__POOL_SIZE": "8", "CHATTERD_BOT__MAX_IN_FLIGHT": "16"}


def daemon_env(
    tmp_path: Path,
    *,
    storage_url: str,
    model_url: str,
    http_port: int,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a daemon on fakes: no config file, everything on loopback."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CHATTERD_", "OPENAI_", "TELEGRAM_", "DDGS_"))
    }
    env.update(
        CHATTERD_CONFIG=str(tmp_path / "absent.toml"),
        CHATTERD_STORAGE__URL=storage_url,
        CHATTERD_BOT__WORKSPACE=str(tmp_path / "workspace"),
        CHATTERD_LLM__BASE_URL=model_url,
        CHATTERD_LLM__API_KEY="sk-fault-test",
        CHATTERD_LLM__MODEL="fake-model",
        CHATTERD_LLM__MAX_RETRIES="0",
        CHATTERD_HTTP__PORT=str(http_port),
        CHATTERD_CONTEXT__COMPACTION="false",
        CHATTERD_BOT__RECOVERY_INTERVAL_S="0.5",
        # Each message its own turn, as before bursts; a burst test sets its own window.
        CHATTERD_GROUPS__BURST_MS="0",
        CHATTERD_PRIVATE__BURST_MS="0",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra or {})
    return env
