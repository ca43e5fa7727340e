"""`run_python` on the real daemon, the fake model (native tool calls) and the fake Bot
API, on each engine this machine can run.

Asserted on the wire: the tool result in the model's next request, the photo the Bot API
got (sendPhoto, once), a CSV shared in the chat read from in/, the tool left out of a
member's request and a forced call not run, no secret of the daemon in any request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, private_chat, user
from tests.rig import daemon, settings_for, telegram_section
from tests.sandbox.support import ENGINES, PNG_CODE, WASI_CACHE, ready

ALICE = user(1001, "Alice")  # an admin
BOB = user(1002, "Bob")  # a member
SECRET_ENV = "sk-env-secret-7777"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(reply="Done.", model="chat-model") as fake:
        yield fake


@pytest.fixture(params=ENGINES)
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    await ready(request.param, tmp_path / "sandbox")  # skipped where it cannot run
    return str(request.param)


def tg_settings(
    tmp_path: Path, url: str, model: FakeOpenAI, tg: FakeTelegram, engine: str
) -> Settings:
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
        telegram=telegram_section(tg),
        bot={"admins": [f"telegram:{ALICE['id']}"]},
        tools={"mode": "native", "search": False},
        sandbox=sandbox,
    )


def run_call(code: str) -> list[dict[str, Any]]:
    return [{"name": "run_python", "arguments": {"code": code}}]


def tool_turns(request: Any) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_the_result_reaches_the_next_request_and_a_png_arrives_as_one_photo(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram, engine: str
) -> None:
    model.reply_tool_calls(run_call(PNG_CODE + "\nprint(sum(range(10)))"))
    model.reply("Here is your plot.")
    async with daemon(tg_settings(tmp_path, database_url, model, tg, engine)):
        tg.push_message(private_chat(ALICE), ALICE, "plot something")
        await tg.wait_for("sendMessage", 1, within_s=60)
        await tg.wait_until(lambda: len(tg.photos) >= 1, within_s=10)
    asked, follow_up = model.requests[-2:]
    assert "run_python" in {t["function"]["name"] for t in asked["tools"]}
    (result,) = tool_turns(follow_up)
    assert "45" in result and "plot.png (photo)" in result and "Exit status: 0" in result
    (photo,) = tg.photos
    assert photo["chat_id"] == ALICE["id"] and photo["bytes"].startswith(b"\x89PNG")


async def test_a_csv_shared_in_the_chat_is_read_from_in(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram, engine: str
) -> None:
    csv = b"item,price\napple,3\npear,4\n"
    file_id = tg.add_file(csv)
    doc = {
        "file_id": file_id,
        "file_unique_id": f"u-{file_id}",
        "file_name": "prices.csv",
        "mime_type": "text/csv",
        "file_size": len(csv),
    }
    code = "import csv\nrows = list(csv.DictReader(open('in/prices.csv')))\n"
    code += "print('total', sum(int(r['price']) for r in rows))"
    model.reply_tool_calls(run_call(code))
    model.reply("The total is 7.")
    async with daemon(tg_settings(tmp_path, database_url, model, tg, engine)):
        tg.push_message(private_chat(ALICE), ALICE, None, caption="sum it", document=doc)
        await tg.wait_for("sendMessage", 1, within_s=60)
    (result,) = tool_turns(model.requests[-1])
    assert "total 7" in result


async def test_a_member_is_not_offered_the_tool_and_a_forced_call_does_not_run(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram, engine: str
) -> None:
    model.reply_tool_calls(run_call("open('out/x.txt', 'w').write('ran')\nprint('R' + 'AN')"))
    model.reply("No.")
    async with daemon(tg_settings(tmp_path, database_url, model, tg, engine)):
        tg.push_message(private_chat(BOB), BOB, "run this")
        await tg.wait_for("sendMessage", 1, within_s=30)
    forced, follow_up = model.requests[-2:]
    assert "run_python" not in {t["function"]["name"] for t in forced.get("tools") or []}
    (result,) = tool_turns(follow_up)
    assert "not available" in result and "RAN" not in result
    assert tg.documents == [] and not list((tmp_path / "sandbox").glob("*/out/*"))


async def test_no_secret_of_the_daemon_reaches_the_model_and_the_daemon_keeps_answering(
    tmp_path: Path,
    database_url: str,
    model: FakeOpenAI,
    tg: FakeTelegram,
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHATTERD_TEST_SECRET", SECRET_ENV)
    settings = tg_settings(tmp_path, database_url, model, tg, engine)
    snoop = (
        "import os\nprint(dict(os.environ))\n"
        "for p in ('/proc/1/environ', '/proc/1/cmdline'):\n"
        "    try:\n        print(open(p, 'rb').read())\n"
        "    except Exception as exc:\n        print(p, type(exc).__name__)\n"
    )
    model.reply_tool_calls(run_call(snoop))
    model.reply("Nothing to see.")
    model.reply_tool_calls(run_call("while True:\n    pass"))
    model.reply("That took too long.")
    model.reply("Hello Bob.")
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, "what is in your environment?")
        await tg.wait_for("sendMessage", 1, within_s=60)
        tg.push_message(private_chat(ALICE), ALICE, "loop forever")
        # Bob only once Alice's turn took the loop's tool call (else his turn may take
        # it and be refused it as a member, and no loop runs at all).
        await model.wait_for_requests(3, timeout_s=30)
        tg.push_message(private_chat(BOB), BOB, "hi")  # answered while the loop runs
        await tg.wait_for("sendMessage", 3, within_s=90)
    everything = json.dumps([r.json for r in model.requests])
    token = settings.telegram.token
    assert token is not None and token.get_secret_value() not in everything
    assert SECRET_ENV not in everything and "sk-test-chat" not in everything
    looped = [t for r in model.requests for t in tool_turns(r) if "Stopped:" in t]
    assert looped and "longer than its limit of 8 s" in looped[0]
