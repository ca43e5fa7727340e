"""The real daemon (bot.wiring.app.App) with real channels, end to end against the fake servers.

Each test starts the whole composition from a `Settings`: storage on the test database
(SQLite, or PostgreSQL when CHATTERD_TEST_DATABASE_URL is set), the chat model and the
vision model as two FakeOpenAI servers, and Telegram (FakeTelegram) or QQ (FakeOneBot
connecting to our reverse WebSocket). Nothing of our own is mocked: what is asserted is
what crossed the wire (Bot API calls, OneBot actions, model requests) and what was stored.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.wiring.app import App
from bot.wiring.registry import ChannelDeps
from channels.http.channel import HttpChannel
from channels.onebot.channel import OneBotChannel
from core.turn.gate import UNREADABLE_NOTICE
from core.turn.ratelimit import RATE_NOTICE
from memory.turns.store import SqlStorage
from tests.fakes.files import make_png
from tests.fakes.onebot_impl import FakeLink, FakeOneBot, MediaServer
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, content_text, last_user_text
from tests.fakes.telegram_server import (
    ApiCall,
    FakeTelegram,
    entity,
    group_chat,
    private_chat,
    sticker,
    user,
)
from tests.rig import daemon, settings_for, telegram_section

BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice", "Liddell", username="alice")
BOB = user(1002, "Bob")
GROUP = group_chat(-100500, "Tea party")
QQ_SELF = 10001
QQ_TOKEN = "onebot-test-token"
DESCRIPTION = "a red bicycle"
FACT = "likes green tea"


PNG = make_png()


def system_prompt(request: RecordedRequest) -> str:
    """Every system message's text: the stable head and this turn's tail after the history."""
    messages = request["messages"]
    assert messages[0]["role"] == "system"
    return "\n\n".join(content_text(m["content"]) for m in messages if m["role"] == "system")


def chat_model(body: dict[str, Any]) -> str:
    """The chat model: remembers on request, confirms after the tool round, else echoes."""
    last = last_user_text(body) or ""
    if "Remembered about" in last:  # the observation of the [Remember: ...] round
        return "Sure! I'll keep that in mind."
    if "I like green tea" in last:
        return f"Sure! [Remember: {FACT}]"
    return "echo: " + last.splitlines()[0]


async def exchange(tg: FakeTelegram, push: Callable[[], object]) -> ApiCall:
    """Push one update and wait for the bot's next sendMessage."""
    before = len(tg.calls_of("sendMessage"))
    push()
    sent = await tg.wait_for("sendMessage", before + 1)
    return sent[before]


def mention(text: str) -> list[dict[str, Any]]:
    return [entity("mention", text, f"@{BOT}")]


def command(text: str) -> list[dict[str, Any]]:
    return [entity("bot_command", text, text.split()[0])]


FAKE_CHAT = {"reply": chat_model}  # served by conftest.py's `chat` fixture


FAKE_VISION = {"reply": DESCRIPTION}  # served by conftest.py's `vision` fixture


def test_the_test_png_decodes_as_a_real_image() -> None:
    image_module = pytest.importorskip("PIL.Image")
    with image_module.open(io.BytesIO(PNG)) as image:
        image.load()
        assert (image.format, image.size, image.mode) == ("PNG", (8, 8), "RGB")
        assert image.getpixel((0, 0)) == (255, 0, 40)


async def test_telegram_photo_is_described_and_the_answer_comes_back(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    vision: FakeOpenAI,
    tg: FakeTelegram,
) -> None:
    settings = settings_for(tmp_path, database_url, chat, vision, telegram=telegram_section(tg))
    async with daemon(settings):
        photo = tg.add_photo(PNG, thumb=make_png(2, 2))
        sent = await exchange(
            tg,
            lambda: tg.push_message(
                private_chat(ALICE), ALICE, None, caption="what is this?", photo=photo
            ),
        )

    # The vision model got the original (largest) photo's bytes as a data URL.
    (seen,) = vision.requests
    assert seen["model"] == "vision-model"
    parts = seen["messages"][0]["content"]
    urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert urls == ["data:image/png;base64," + base64.b64encode(PNG).decode("ascii")]
    (get_file,) = tg.calls_of("getFile")
    assert get_file.params["file_id"] == photo[-1]["file_id"]

    # The chat model saw who spoke, the caption and the description; never the image.
    (asked,) = chat.requests
    assert asked["model"] == "chat-model"
    last = asked["messages"][-1]
    assert last["role"] == "user" and isinstance(last["content"], str)
    assert "[Alice Liddell]: what is this?" in last["content"]
    assert f"(Image 1: {DESCRIPTION})" in last["content"]
    assert "base64" not in str(asked["messages"])

    # The answer went back to Alice's chat, unthreaded (a private chat).
    assert sent.params["chat_id"] == ALICE["id"]
    assert sent.params["text"] == "echo: [Alice Liddell]: what is this?"
    assert "reply_parameters" not in sent.params

    # The stored user turn keeps the description and the image's hash, not its bytes.
    turns = await storage.recent_turns("telegram", str(ALICE["id"]), 10)
    assert [(t.role, t.kind) for t in turns] == [("user", "message"), ("assistant", "message")]
    stored = turns[0]
    assert stored.sender_id == str(ALICE["id"]) and stored.sender_name == "Alice Liddell"
    assert f"(Image 1: {DESCRIPTION})" in stored.content
    assert stored.meta["images"] == [hashlib.sha256(PNG).hexdigest()]
    assert turns[1].content == sent.params["text"]


BROKEN_IMAGES = {
    "not-an-image": b"%PDF-1.4 this is not a picture at all\n" * 8,
    "truncated-png": PNG[: len(PNG) // 2],  # right signature and header, data cut off
}


@pytest.mark.parametrize("broken", list(BROKEN_IMAGES.values()), ids=list(BROKEN_IMAGES))
async def test_telegram_broken_image_is_answered_without_the_vision_model(
    broken: bytes,
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    vision: FakeOpenAI,
    tg: FakeTelegram,
) -> None:
    settings = settings_for(tmp_path, database_url, chat, vision, telegram=telegram_section(tg))
    async with daemon(settings):
        photo = tg.add_photo(broken)
        sent = await exchange(
            tg,
            lambda: tg.push_message(
                private_chat(ALICE), ALICE, None, caption="can you read this?", photo=photo
            ),
        )

    assert len(tg.calls_of("getFile")) == 1  # it was fetched, then found unreadable
    assert vision.requests == []
    (asked,) = chat.requests
    last = content_text(asked["messages"][-1]["content"])
    assert "[Alice Liddell]: can you read this?" in last
    assert "(Image 1: could not be read)" in last
    assert sent.params["chat_id"] == ALICE["id"]
    assert sent.params["text"] == "echo: [Alice Liddell]: can you read this?"
    turns = await storage.recent_turns("telegram", str(ALICE["id"]), 10)
    assert "(Image 1: could not be read)" in turns[0].content
    assert "images" not in turns[0].meta  # no hash: nothing readable was kept


async def test_qq_group_image_from_a_local_media_host_is_described(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    vision: FakeOpenAI,
) -> None:
    media = await MediaServer().start()
    media.files["pics/bike.png"] = (PNG, "image/png")
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {
        "enabled": True,
        "host": "127.0.0.1",
        "port": 0,  # the OS picks; read back from the channel
        "access_token": QQ_TOKEN,
        "allow_private_media_hosts": ["127.0.0.1"],  # NapCat serves files on loopback
    }
    settings = settings_for(tmp_path, database_url, chat, vision, onebot=onebot)
    try:
        async with daemon(settings) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link: FakeLink = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
            )
            await link.next_action("get_login_info")
            event = impl.group_message(
                [
                    {"type": "at", "data": {"qq": str(QQ_SELF)}},
                    {"type": "text", "data": {"text": " what is in this picture?"}},
                    {
                        "type": "image",
                        "data": {"file": "bike.png", "url": f"{media.base}/pics/bike.png"},
                    },
                ],
                user_id=20002,
                group_id=30003,
                card="Alice",
                nickname="al",
            )
            await link.send_event(event)
            frame = await link.next_action("send_group_msg")
    finally:
        await impl.close()
        await media.close()

    assert media.hits == ["pics/bike.png"]
    (seen,) = vision.requests
    assert seen["model"] == "vision-model"
    urls = [p["image_url"]["url"] for p in seen["messages"][0]["content"] if "image_url" in p]
    assert urls == ["data:image/png;base64," + base64.b64encode(PNG).decode("ascii")]

    (asked,) = chat.requests
    last = content_text(asked["messages"][-1]["content"])
    assert "[Alice]: what is in this picture?" in last
    assert f"(Image 1: {DESCRIPTION})" in last

    assert frame["params"] == {
        "group_id": 30003,
        "message": [
            {"type": "reply", "data": {"id": str(event["message_id"])}},
            {"type": "text", "data": {"text": "echo: [Alice]: what is in this picture?"}},
        ],
    }
    turns = await storage.recent_turns("qq", "group:30003", 10)
    assert [(t.role, t.kind) for t in turns] == [("user", "message"), ("assistant", "message")]
    assert f"(Image 1: {DESCRIPTION})" in turns[0].content
    assert turns[0].meta["images"] == [hashlib.sha256(PNG).hexdigest()]


async def test_telegram_memory_told_listed_used_isolated_and_forgotten(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
) -> None:
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))

    def say(who: dict[str, Any], text: str, entities: list[dict[str, Any]]) -> Callable[[], object]:
        return lambda: tg.push_message(GROUP, who, text, entities=entities)

    async with daemon(settings):
        # 1. Alice tells the bot a fact; the model writes a [Remember: ...] marker.
        told = f"@{BOT} I like green tea"
        first = len(chat.requests)
        sent = await exchange(tg, say(ALICE, told, mention(told)))
        remember_round = chat.requests[first:]
        assert len(remember_round) == 2  # the marker, then the answer after the observation
        assert "Remembered about Alice Liddell" in (
            last_user_text(remember_round[1].json or {}) or ""
        )
        assert sent.params["chat_id"] == GROUP["id"]
        assert sent.params["text"] == "Sure! I'll keep that in mind."
        assert "[Remember" not in sent.params["text"]
        (item,) = await storage.list_memories("telegram", str(ALICE["id"]))
        assert (item.content, item.author) == (FACT, "model")
        assert await storage.list_memories("telegram", str(BOB["id"])) == []

        # 2. /memory in the group: the numbered list goes to Alice privately.
        listed = await exchange(tg, say(ALICE, "/memory", command("/memory")))
        assert listed.params["chat_id"] == ALICE["id"]
        assert "1. likes green tea" in listed.params["text"].splitlines()

        # 3. Her next turn's system prompt carries the fact.
        asked = len(chat.requests)
        again = f"@{BOT} what should I drink?"
        await exchange(tg, say(ALICE, again, mention(again)))
        (alice_turn,) = chat.requests[asked:]
        assert FACT in system_prompt(alice_turn)

        # 4. Bob, in the same group, never gets Alice's memory in his system prompt.
        asked = len(chat.requests)
        bobs = f"@{BOT} and what should I drink?"
        sent = await exchange(tg, say(BOB, bobs, mention(bobs)))
        (bob_turn,) = chat.requests[asked:]
        assert FACT not in system_prompt(bob_turn)
        assert sent.params["chat_id"] == GROUP["id"]
        bob_list = await exchange(tg, say(BOB, "/memory", command("/memory")))
        assert bob_list.params["chat_id"] == BOB["id"]
        assert FACT not in bob_list.params["text"]

        # 5. /memory forget 1 removes it; the next system prompt lacks it.
        forgot = await exchange(tg, say(ALICE, "/memory forget 1", command("/memory forget 1")))
        assert forgot.params["text"] == f"Forgotten: {FACT}"
        assert await storage.list_memories("telegram", str(ALICE["id"])) == []
        asked = len(chat.requests)
        last = f"@{BOT} anything else?"
        await exchange(tg, say(ALICE, last, mention(last)))
        (after,) = chat.requests[asked:]
        assert FACT not in system_prompt(after)
        empty = await exchange(tg, say(ALICE, "/memory", command("/memory")))
        assert empty.params["chat_id"] == ALICE["id"]
        assert FACT not in empty.params["text"]

    # The tool round is in the group's history: the marker kept, the answer stored.
    turns = await storage.recent_turns("telegram", str(GROUP["id"]), 50)
    kinds = [(t.role, t.kind) for t in turns[:4]]
    assert kinds == [
        ("user", "message"),
        ("assistant", "tool_call"),
        ("user", "tool_result"),
        ("assistant", "message"),
    ]
    assert f"[Remember: {FACT}]" in turns[1].content
    assert not any(t.content.startswith("/memory") for t in turns)  # commands are not stored


# -- the per-user rate limit, on every channel ([bot] rate_limit_per_min) -------------


def qq_text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "data": {"text": text}}]


@pytest.mark.parametrize("key_in", ["bot", "telegram"])
async def test_telegram_rate_limit_answers_once_per_window_and_spares_untriggered(
    key_in: str,
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
) -> None:
    """Also: the old `[telegram] rate_limit_per_min` still works (its log line: test_config)."""
    limit = {"rate_limit_per_min": 2}
    if key_in == "telegram":
        settings = settings_for(
            tmp_path, database_url, chat, telegram={**telegram_section(tg), **limit}
        )
    else:
        settings = settings_for(
            tmp_path, database_url, chat, telegram=telegram_section(tg), bot=limit
        )
    assert settings.bot.rate_limit_per_min == 2

    for n in range(1, 5):
        tg.push_message(private_chat(ALICE), ALICE, f"message {n}")
    tg.push_message(GROUP, ALICE, "ordinary group chatter is not counted")
    async with daemon(settings):
        await tg.wait_for("sendMessage", count=3)

    texts = [p["text"] for p in tg.sent]
    assert sorted(texts) == sorted(
        [
            "echo: [Alice Liddell]: message 1",
            "echo: [Alice Liddell]: message 2",
            RATE_NOTICE,
        ]
    )
    assert len(chat.requests) == 2  # refused messages never reach the model
    group = await storage.recent_turns("telegram", str(GROUP["id"]), 10)
    assert [(t.kind, t.content) for t in group] == [
        ("context", "[Alice Liddell]: ordinary group chatter is not counted")
    ]


async def test_qq_user_over_the_rate_limit_is_told_once_and_admins_are_exempt(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="core.turn.gate")
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0, "access_token": QQ_TOKEN}
    onebot["send_interval_s"] = 0.0  # six replies: pacing is tested on a fake clock elsewhere
    admin = {"rate_limit_per_min": 2, "admins": ["qq:20009"]}
    settings = settings_for(tmp_path, database_url, chat, onebot=onebot, bot=admin)
    try:
        async with daemon(settings) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
            )
            await link.next_action("get_login_info")
            for n in range(1, 6):
                await link.send_event(impl.private_message(qq_text(f"message {n}")))
            await impl.wait_sent(3)
            # Decided in arrival order: by the admin's replies, Alice's five are settled.
            for n in range(1, 4):
                event = impl.private_message(qq_text(f"admin {n}"), user_id=20009, nickname="op")
                await link.send_event(event)
            await impl.wait_sent(6)
    finally:
        await impl.close()

    def texts_to(user_id: int) -> list[str]:
        return [
            segment["data"]["text"]
            for sent in impl.sent
            if sent["params"]["user_id"] == user_id
            for segment in sent["params"]["message"]
        ]

    assert sorted(texts_to(20002)) == sorted(
        ["echo: [alice]: message 1", "echo: [alice]: message 2", RATE_NOTICE]
    )
    assert texts_to(20009) == [f"echo: [op]: admin {n}" for n in range(1, 4)]
    assert len(chat.requests) == 2 + 3  # nothing for Alice's refused three
    refused = [r for r in caplog.records if "over the rate limit" in r.getMessage()]
    assert len(refused) == 3 and all("qq:20002" in r.getMessage() for r in refused)


async def test_http_user_over_the_rate_limit_is_told_once(
    tmp_path: Path, database_url: str, chat: FakeOpenAI
) -> None:
    http = {"enabled": True, "host": "127.0.0.1", "port": 0}
    settings = settings_for(tmp_path, database_url, chat, http=http, bot={"rate_limit_per_min": 2})
    async with daemon(settings) as app:
        (channel,) = app.channels
        assert isinstance(channel, HttpChannel)
        url = f"http://127.0.0.1:{channel.port}/v1/chat"
        async with aiohttp.ClientSession() as session:

            async def say(user: str, text: str) -> Any:
                body = {"user_id": user, "chat_type": "private", "text": text}
                async with session.post(url, json=body) as response:
                    assert response.status == 200
                    return (await response.json())["reply"]

            answers = [await say("u1", f"message {n}") for n in range(1, 5)]
            other = await say("u2", "hello")
    assert answers == ["echo: [u1]: message 1", "echo: [u1]: message 2", RATE_NOTICE, None]
    assert other == "echo: [u2]: hello"  # per user: someone else is still answered
    assert len(chat.requests) == 3


async def test_console_is_never_rate_limited(
    tmp_path: Path, database_url: str, chat: FakeOpenAI
) -> None:
    """The console is the operator at their own terminal (`chatterd chat`)."""
    settings = settings_for(tmp_path, database_url, chat, bot={"rate_limit_per_min": 1})
    out = io.StringIO()
    deps = ChannelDeps(settings, dict, io.StringIO("one\ntwo\nthree\n"), out, "tester")
    async with App(settings, mode="chat", deps=deps) as app:
        await asyncio.wait_for(app.wait_console_or(asyncio.Event()), 10)
    assert len(chat.requests) == 3
    assert "echo: [tester]: three" in out.getvalue() and RATE_NOTICE not in out.getvalue()


async def test_unreadable_dm_is_told_through_the_door_and_groups_and_strangers_are_not(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    """A sticker says nothing the bot can read: an allowed private sender is told so, once,
    through the core's delivery; a group and a sender the access rules refuse hear nothing,
    and nothing of it is stored or sent to the model."""
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        telegram=telegram_section(tg),
        access={"blocked_users": [f"telegram:{BOB['id']}"]},
    )
    tg.push_message(GROUP, ALICE, None, sticker=sticker())
    tg.push_message(private_chat(BOB), BOB, None, sticker=sticker())
    tg.push_message(private_chat(ALICE), ALICE, None, sticker=sticker())
    async with daemon(settings):
        (sent,) = await tg.wait_for("sendMessage")
    # One getUpdates batch, and stopping drains every handler: all three were decided.
    assert sent.params["chat_id"] == ALICE["id"] and sent.params["text"] == UNREADABLE_NOTICE
    assert len(tg.calls_of("sendMessage")) == 1 and chat.requests == []
    assert await storage.recent_turns("telegram", str(ALICE["id"]), 10) == []
    assert await storage.recent_turns("telegram", str(GROUP["id"]), 10) == []
