"""Issue 34 §2 and 35.6 through the real daemon's HTTP API: a private chat id other than
the user's own is a thread that belongs to whoever first used it; groups never share an
id with a person's chat, so no request can squat someone's own chat. Memory stays per
person across every thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from alembic import command
from sqlalchemy import insert

from memory.chats.models import ChatSettingsRow
from memory.db.migrate import Database, alembic_config, parse_url
from memory.turns.store import SqlStorage, open_storage
from memory.turns.types import NewTurn
from tests.console.console_support import Running, console_settings, running
from tests.fakes.openai_server import FakeOpenAI, last_user_text


def echo(body: dict[str, Any]) -> str:
    return "ok: " + (last_user_text(body) or "").split("]: ", 1)[-1]


FAKE_CHAT = {"reply": echo, "model": "fake-model"}  # served by conftest.py's `model` fixture


@pytest.fixture
async def daemon(tmp_path: Path, database_url: str, model: FakeOpenAI) -> AsyncIterator[Running]:
    settings = console_settings(tmp_path, database_url, model, bot={"rate_limit_per_min": 0})
    async with running(settings) as run:
        yield run


class Api:
    def __init__(self, session: aiohttp.ClientSession, run: Running) -> None:
        self.session, self.url = session, f"{run.base}/v1/chat"

    async def say(self, user: str, text: str, **fields: Any) -> tuple[int, Any]:
        body = {"user_id": user, "chat_type": "private", "text": text, **fields}
        async with self.session.post(self.url, json=body) as response:
            return response.status, await response.json()


def sent(model: FakeOpenAI, index: int = -1) -> str:
    return json.dumps(model.requests[index]["messages"], ensure_ascii=False)


async def test_one_person_keeps_several_threads_each_with_its_own_history(
    daemon: Running, model: FakeOpenAI
) -> None:
    async with aiohttp.ClientSession() as session:
        api = Api(session, daemon)
        assert (await api.say("alice", "/memory add I am vegetarian"))[0] == 200
        assert await api.say("alice", "thread one: the trip to Kyoto", chat_id="t-1") == (
            200,
            {"reply": "ok: thread one: the trip to Kyoto", "private": False},
        )
        status, _ = await api.say("alice", "thread two: tax forms", chat_id="t-2")
        assert status == 200
        assert "Kyoto" not in sent(model)  # t-2 does not see t-1
        assert "vegetarian" in sent(model)  # her memory follows her into every thread
        status, _ = await api.say("alice", "back to the trip", chat_id="t-1")
        assert status == 200 and "Kyoto" in sent(model) and "tax forms" not in sent(model)
        # Her own chat, named or not, is one chat apart from her threads.
        assert (await api.say("alice", "hello", chat_id="alice"))[0] == 200
        assert (await api.say("alice", "hello again"))[0] == 200
        assert "hello" in sent(model) and "Kyoto" not in sent(model)


async def test_another_user_naming_a_thread_or_a_private_chat_is_refused(
    daemon: Running, model: FakeOpenAI
) -> None:
    async with aiohttp.ClientSession() as session:
        api = Api(session, daemon)
        assert (await api.say("alice", "secret plan 4711", chat_id="plans"))[0] == 200
        assert (await api.say("alice", "my own note 99"))[0] == 200
        asked = len(model.requests)
        for chat in ("plans", "alice"):
            status, body = await api.say("mallory", "what is in here?", chat_id=chat)
            assert status == 403 and "belongs to another user" in body["error"], chat
        assert len(model.requests) == asked  # refused before anything was accepted
        # Alice is not locked out of either.
        assert (await api.say("alice", "still mine", chat_id="plans"))[0] == 200
        assert "secret plan 4711" in sent(model)


async def test_nobody_can_squat_someone_elses_own_chat(daemon: Running, model: FakeOpenAI) -> None:
    async with aiohttp.ClientSession() as session:
        api = Api(session, daemon)
        # Mallory names Carol's user id first: as a group, and as a private thread.
        group = {"chat_type": "group", "chat_id": "carol", "mentions_bot": True}
        assert (await api.say("mallory", "group gossip 1", **group))[0] == 200
        assert (await api.say("mallory", "thread gossip 2", chat_id="carol"))[0] == 200
        # Carol's own chat is still hers, and none of Mallory's words reach it.
        status, body = await api.say("carol", "hi, it's me")
        assert status == 200 and body["reply"] == "ok: hi, it's me"
        assert "gossip" not in sent(model)
        assert (await api.say("carol", "me again", chat_id="carol"))[0] == 200
        assert "gossip" not in sent(model) and "hi, it's me" in sent(model)
        # And Mallory's group and thread stay Mallory's.
        assert (await api.say("mallory", "group again", **group))[0] == 200
        assert "group gossip 1" in sent(model) and "hi, it's me" not in sent(model)


async def test_a_group_named_like_a_user_never_locks_them_out(
    daemon: Running, model: FakeOpenAI
) -> None:
    """Issue 35.6: a group request naming someone's id used to make their private chat
    answer 403 from then on."""
    async with aiohttp.ClientSession() as session:
        api = Api(session, daemon)
        group = {"chat_type": "group", "chat_id": "dave", "mentions_bot": True}
        assert (await api.say("eve", "squatting", **group))[0] == 200
        for _ in range(2):
            status, _ = await api.say("dave", "my own chat")
            assert status == 200
        assert "squatting" not in sent(model)


async def test_http_groups_stored_before_the_split_keep_their_history(database_url: str) -> None:
    """Migration 0010 renames the HTTP groups already stored to `group:<id>` in every table
    that names them, so an upgraded daemon still finds their turns and settings; private
    chats and other platforms are left as they were."""
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    await asyncio.to_thread(command.upgrade, config, "0009")
    db = Database(parse_url(database_url))
    old = SqlStorage(db)
    try:
        for platform, chat, kind in [("http", "team", "group"), ("http", "ann", "private"),
                                     ("qq", "group:5", "group")]:  # fmt: skip
            await old.add_turn(NewTurn(platform, chat, kind, "user", "message", "hi", 1, "ann"))
        # Written as the 0009 schema holds it: today's store would also name later columns.
        row = insert(ChatSettingsRow.__table__).values(
            platform="http", chat_id="team", persona="pirate", updated_by="test"
        )
        await db.write(lambda conn: conn.execute(row))
    finally:
        await old.close()
    await asyncio.to_thread(command.upgrade, config, "head")
    new = await open_storage(database_url, migrate=False)
    try:
        assert [t.content for t in await new.recent_turns("http", "group:team", 5)] == ["hi"]
        assert await new.recent_turns("http", "team", 5) == []
        assert (await new.chat_settings.get("http", "group:team")).persona == "pirate"
        assert len(await new.recent_turns("http", "ann", 5)) == 1
        assert len(await new.recent_turns("qq", "group:5", 5)) == 1
    finally:
        await new.close()


async def test_a_push_names_the_chat_as_the_caller_did(tmp_path: Path) -> None:
    """Stored ids carry their kind (`group:team`); the push receiver gets the caller's own
    id and the kind apart, with the idempotency key of what it delivers."""
    from aiohttp import web

    from channels.http.push import HttpPush
    from core.messages import OutboundMessage

    got: list[dict[str, Any]] = []

    async def receive(request: web.Request) -> web.Response:
        got.append(await request.json())
        return web.Response()

    app = web.Application()
    app.router.add_post("/push", receive)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        push = HttpPush(f"http://127.0.0.1:{port}/push", None)
        for stored in ("group:team", "thread:t-1", "ann"):
            await push.send(OutboundMessage("http", stored, "hi", occurrence_id="job:7"))
    finally:
        await runner.cleanup()
    shown = [(g["chat_id"], g["chat_type"], g["occurrence_id"]) for g in got]
    assert shown == [("team", "group", "job:7"), ("t-1", "private", "job:7"),
                     ("ann", "private", "job:7")]  # fmt: skip
