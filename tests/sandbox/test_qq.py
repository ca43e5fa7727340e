"""`run_python` in a QQ group, on the real daemon, the fake model and the fake OneBot
implementation, on each engine this machine can run.

Asserted on the wire: a CSV the run writes to out/ arrives as exactly one
`upload_group_file` (its name and bytes as written), a PNG as exactly one `image`
segment, and the model is told both were sent.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from channels.onebot.channel import OneBotChannel
from tests.fakes.onebot_impl import FakeOneBot, eventually
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import daemon, settings_for
from tests.sandbox.support import ENGINES, PNG_CODE, WASI_CACHE, ready

QQ_SELF = 10001
ADMIN = 20009
GROUP = 30003
QQ = {"enabled": True, "host": "127.0.0.1", "port": 0, "send_interval_s": 0}
CSV_CODE = 'open("out/table.csv", "w").write("year,total\\n1,105.0\\n2,110.25\\n")'


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(reply="Done.", model="chat-model") as fake:
        yield fake


@pytest.fixture
async def impl() -> AsyncIterator[FakeOneBot]:
    fake = FakeOneBot(self_id=QQ_SELF)
    yield fake
    await fake.close()


@pytest.fixture(params=ENGINES)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    await ready(request.param, tmp_path / "sandbox")  # skipped where it cannot run
    return str(request.param)


def qq_settings(tmp_path: Path, url: str, model: FakeOpenAI, engine: str) -> Settings:
    sandbox = {
        "enabled": True,
        "engine": engine,
        "folder": str(tmp_path / "sandbox"),
        "wasi_cache": str(WASI_CACHE),
        "timeout_s": 8,
    }
    return settings_for(
        tmp_path,
        url,
        model,
        onebot=QQ,
        bot={"admins": [f"qq:{ADMIN}"]},
        tools={"mode": "native", "search": False},
        sandbox=sandbox,
    )


def at_bot(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "at", "data": {"qq": str(QQ_SELF)}},
        {"type": "text", "data": {"text": f" {text}"}},
    ]


def images_sent(impl: FakeOneBot) -> list[bytes]:
    return [
        base64.b64decode(segment["data"]["file"].removeprefix("base64://"))
        for entry in impl.sent
        for segment in entry["params"].get("message", [])
        if segment.get("type") == "image"
    ]


async def test_a_csv_arrives_as_one_group_file_and_a_png_as_one_image(
    tmp_path: Path, database_url: str, model: FakeOpenAI, impl: FakeOneBot, engine: str
) -> None:
    code = PNG_CODE + "\n" + CSV_CODE
    model.reply_tool_calls([{"name": "run_python", "arguments": {"code": code}}])
    model.reply("Here are the table and the plot.")
    async with daemon(qq_settings(tmp_path, database_url, model, engine)) as app:
        (channel,) = app.channels
        assert isinstance(channel, OneBotChannel)
        link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
        await link.next_action("get_login_info")
        event = impl.group_message(at_bot("make a table and a plot"), user_id=ADMIN)
        await link.send_event(event)
        await eventually(
            lambda: any("Here are the table" in str(e["params"]) for e in impl.sent),
            limit_s=60,
        )
    assert [(u["action"], u["to"], u["name"]) for u in impl.uploads] == [
        ("upload_group_file", GROUP, "table.csv")
    ]
    assert impl.uploads[0]["data"] == b"year,total\n1,105.0\n2,110.25\n"
    (png,) = images_sent(impl)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    result = [m for m in model.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert "table.csv (document)" in str(result["content"])
    assert "plot.png (photo)" in str(result["content"])
