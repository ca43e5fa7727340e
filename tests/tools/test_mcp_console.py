"""The operator's view of MCP tools: /healthz and the console show each server's state
and tool count, and the console lists recent tool calls."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.console.console_support import client, console_settings, running, sign_in
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]


async def test_healthz_and_console_show_servers_and_recent_calls(
    tmp_path: Path, database_url: str
) -> None:
    server = {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "cwd": str(ROOT)}
    async with FakeOpenAI("done") as model:
        settings = console_settings(
            tmp_path,
            database_url,
            model,
            tools={"mode": "native"},
            mcp={"servers": {"dict": server}},
        )
        async with running(settings) as run, client() as session:
            model.reply_tool_calls([{"name": "dict__lookup", "arguments": {"word": "owl"}}])
            body = {"user_id": "u1", "chat_id": "u1", "chat_type": "private", "text": "an owl?"}
            async with session.post(f"{run.base}/v1/chat", json=body) as answered:
                assert answered.status == 200, await answered.text()
            async with session.get(f"{run.base}/healthz") as health:
                state = (await health.json())["mcp"]["dict"]
            assert state["state"] == "ready" and state["tools"] == 6
            await sign_in(session, run.base)
            async with session.get(f"{run.base}/console/") as page:
                html = await page.text()
            assert "Tool servers (MCP)" in html
            assert "<td>dict</td><td>lookup</td>" in html and "<td>ok</td>" in html
