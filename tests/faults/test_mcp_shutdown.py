"""The real daemon with a stdio MCP server: SIGTERM leaves no server process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.faults.daemon import Daemon, daemon_env, free_port

pytestmark = pytest.mark.faults
ROOT = Path(__file__).resolve().parent.parent.parent


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone(pid: int) -> None:
    for _ in range(100):  # the daemon waited for it; init may still be reaping
        if not alive(pid):
            return
        await asyncio.sleep(0.05)


def stdio_daemon(tmp_path: Path, database_url: str, model: FakeOpenAI) -> Daemon:
    """A daemon with the fake stdio server, which records its pid and its child's."""
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp]\n"
        f'servers.test = {{ command = "{sys.executable}", '
        f'args = ["-m", "tests.fakes.mcp_server"], cwd = "{ROOT}" }}\n'
    )
    port = free_port()
    env = daemon_env(
        tmp_path,
        storage_url=database_url,
        model_url=model.base_url,
        http_port=port,
        extra={
            "CHATTERD_CONFIG": str(config),
            "MCP_PIDS": str(tmp_path / "pids"),
            "MCP_GRANDCHILD_PIDS": str(tmp_path / "helpers"),
        },
    )
    return Daemon(env, tmp_path / "daemon.log", port)


async def test_sigterm_ends_every_stdio_server(tmp_path: Path, database_url: str) -> None:
    pids, helpers = tmp_path / "pids", tmp_path / "helpers"
    async with FakeOpenAI("hi") as model:
        daemon = stdio_daemon(tmp_path, database_url, model)
        try:
            await daemon.start(within_s=120)  # a loaded machine starts slowly
            health = await daemon.health()
            assert health["mcp"]["test"]["state"] == "ready", daemon.log()
            [pid] = [int(p) for p in pids.read_text().split()]
            [helper] = [int(p) for p in helpers.read_text().split()]
            assert alive(pid) and alive(helper)
            assert await daemon.terminate() == 0
            await gone(pid)
            # issue 35, item 8: the server's own child ends with its group
            await gone(helper)
            assert not alive(pid) and not alive(helper), daemon.log()
        finally:
            await daemon.close()


async def test_a_crashed_server_leaves_no_child_and_is_reconnected(
    tmp_path: Path, database_url: str
) -> None:
    """The server dies (SIGKILL, as a crash or an OOM kill): its child goes with it, and
    the daemon's reconnect starts a new server whose child ends at SIGTERM too."""
    pids, helpers = tmp_path / "pids", tmp_path / "helpers"
    async with FakeOpenAI("hi") as model:
        daemon = stdio_daemon(tmp_path, database_url, model)
        try:
            await daemon.start(within_s=120)
            [pid] = [int(p) for p in pids.read_text().split()]
            [helper] = [int(p) for p in helpers.read_text().split()]
            os.kill(pid, signal.SIGKILL)
            await gone(helper)
            assert not alive(helper), daemon.log()
            for _ in range(1200):  # noticed at the next ping (30 s), then reconnected
                if (await daemon.health())["mcp"]["test"]["connects"] >= 2:
                    break
                await asyncio.sleep(0.1)
            assert (await daemon.health())["mcp"]["test"]["state"] == "ready", daemon.log()
            [_, helper2] = [int(p) for p in helpers.read_text().split()]
            assert alive(helper2)
            assert await daemon.terminate() == 0
            await gone(helper2)
            assert not alive(helper2), daemon.log()
        finally:
            await daemon.close()
