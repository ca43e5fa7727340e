"""The real daemon with a stdio MCP server: SIGTERM leaves no server process behind."""

from __future__ import annotations

import asyncio
import os
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


async def test_sigterm_ends_every_stdio_server(tmp_path: Path, database_url: str) -> None:
    pids = tmp_path / "pids"
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp]\n"
        f'servers.test = {{ command = "{sys.executable}", '
        f'args = ["-m", "tests.fakes.mcp_server"], cwd = "{ROOT}" }}\n'
    )
    async with FakeOpenAI("hi") as model:
        port = free_port()
        env = daemon_env(
            tmp_path,
            storage_url=database_url,
            model_url=model.base_url,
            http_port=port,
            extra={"CHATTERD_CONFIG": str(config), "MCP_PIDS": str(pids)},
        )
        daemon = Daemon(env, tmp_path / "daemon.log", port)
        try:
            await daemon.start(within_s=120)  # a loaded machine starts slowly
            health = await daemon.health()
            assert health["mcp"]["test"]["state"] == "ready", daemon.log()
            [pid] = [int(p) for p in pids.read_text().split()]
            assert alive(pid)
            assert await daemon.terminate() == 0
            for _ in range(100):  # the daemon waited for it; init may still be reaping
                if not alive(pid):
                    break
                await asyncio.sleep(0.05)
            assert not alive(pid), daemon.log()
        finally:
            await daemon.close()
