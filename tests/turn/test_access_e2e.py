"""Operator controls through the real daemon: `[access]`, `/bot ...` and per-chat settings.

Each test starts bot.wiring.app.App from a Settings over the test database (SQLite, or
PostgreSQL with CHATTERD_TEST_DATABASE_URL) with the fake model and the fake Telegram /
OneBot servers or the HTTP API. A "restart" is a second App over the same database.
What is asserted is what crossed the wire and what was stored. An ignored message has
no reply to wait for, so tests wait for the dispatcher's "not serving" line (one per
ignored message, logged just before it returns) and then look at the database.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.config import Settings
from channels.http.channel import HttpChannel
from channels.onebot.channel import OneBotChannel
from memory.turns.store import SqlStorage
from tests.channels.test_channel_e2e import (
    BOT,
    QQ_SELF,
    QQ_TOKEN,
    command,
    daemon,
    exchange,
    mention,
    qq_text,
    system_prompt,
    telegram_section,
)
from tests.fakes.onebot_impl import FakeLink, FakeOneBot
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, content_text, echo_last_user
from tests.fakes.telegram_server import FakeTelegram, group_chat, private_chat, user
from tests.rig import settings_for

ALICE = user(1001, "Alice")  # a Telegram admin
BOB = user(1002, "Bob")
GROUP = group_chat(-100500, "Tea party")
QQ_ADMIN = 20009
QQ_GROUP = 30003
OTHER_GROUP = 30004


FAKE_CHAT = {"reply": echo_last_user}  # served by conftest.py's `chat` fixture


@pytest.fixture
def ignored(caplog: pytest.LogCaptureFixture) -> Callable[[int], Any]:
    """`await ignored(n)`: wait until the dispatcher has ignored n messages in all."""
    caplog.set_level(logging.DEBUG, logger="core.turn.gate")

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if "not serving" in r.getMessage()]

    async def wait(count: int) -> list[str]:
        await until(lambda: len(lines()) >= count)
        assert len(lines()) == count, lines()
        return lines()

    return wait


async def until(condition: Callable[[], bool | Awaitable[bool]], within_s: float = 5.0) -> None:
    """Wait for `condition` (checked every 10 ms as the loop runs); fail after `within_s`."""
    for _ in range(int(within_s / 0.01)):
        found = condition()
        if await found if inspect.isawaitable(found) else found:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still not true after {within_s}s")


async def nothing_stored(storage: SqlStorage, platform: str, chat_id: str) -> None:
    assert await storage.recent_turns(platform, chat_id, 50) == []
    assert [e for e in await storage.intake.listing() if e.chat_id == chat_id] == []


def prompts(requests: list[RecordedRequest]) -> list[str]:
    return [system_prompt(r) for r in requests]


# -- Telegram: a group outside the allowlist, opened by an admin, across a restart ---------


async def test_telegram_group_outside_the_allowlist_is_opened_by_an_admin_across_a_restart(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
    ignored: Callable[[int], Any],
) -> None:
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        telegram=telegram_section(tg),
        bot={"admins": ["telegram:1001"]},
        access={"groups": "allowlist"},
    )

    def say(who: dict[str, Any], text: str, entities: list[dict[str, Any]] | None = None) -> None:
        tg.push_message(GROUP, who, text, entities=entities or [])

    async with daemon(settings):
        called = f"@{BOT} are you there?"
        say(BOB, called, mention(called))
        say(BOB, "just chatting before the bot was allowed")
        say(BOB, "/help", command("/help"))
        say(BOB, "/bot allow", command("/bot allow"))  # not an admin: ignored, not refused
        say(ALICE, "chatterd, what about an admin's plain message?")
        await ignored(5)
        assert tg.calls_of("sendMessage") == [] and chat.requests == []
        await nothing_stored(storage, "telegram", str(GROUP["id"]))

        opened = await exchange(
            tg, lambda: tg.push_message(GROUP, ALICE, "/bot allow", entities=command("/bot allow"))
        )
        assert opened.params["chat_id"] == GROUP["id"]
        assert opened.params["text"] == "This group is allowed: I answer here from now on."
    assert (await storage.chat_settings.get("telegram", str(GROUP["id"]))).allowed is True

    async with daemon(settings):  # a restart: a new App over the same database
        again = f"@{BOT} and now?"
        answered = await exchange(
            tg, lambda: tg.push_message(GROUP, BOB, again, entities=mention(again))
        )
    assert answered.params["text"] == f"echo: [Bob]: {again}"
    (request,) = chat.requests
    assert "before the bot was allowed" not in str(request["messages"])  # a clean slate
    turns = await storage.recent_turns("telegram", str(GROUP["id"]), 50)
    assert [t.content for t in turns] == [f"[Bob]: {again}", f"echo: [Bob]: {again}"]


async def test_telegram_private_off_serves_only_admins(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
    ignored: Callable[[int], Any],
) -> None:
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        telegram=telegram_section(tg),
        bot={"admins": ["telegram:1001"]},
        access={"private": "off"},
    )
    async with daemon(settings):
        tg.push_message(private_chat(BOB), BOB, "hello?")
        tg.push_message(private_chat(BOB), BOB, "/help", entities=command("/help"))
        await ignored(2)
        sent = await exchange(tg, lambda: tg.push_message(private_chat(ALICE), ALICE, "hi"))
    assert sent.params["chat_id"] == ALICE["id"]
    assert [c.params["chat_id"] for c in tg.calls_of("sendMessage")] == [ALICE["id"]]
    await nothing_stored(storage, "telegram", str(BOB["id"]))


# -- QQ: /bot off and on across a restart, non-admins refused, blocked users ---------------


@asynccontextmanager
async def qq_daemon(settings: Settings, impl: FakeOneBot) -> AsyncIterator[FakeLink]:
    async with daemon(settings) as app:
        (channel,) = app.channels
        assert isinstance(channel, OneBotChannel)
        link = await impl.connect_reverse(
            f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
        )
        await link.next_action("get_login_info")
        yield link


def qq_settings(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, **sections: dict[str, Any]
) -> Settings:
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0, "access_token": QQ_TOKEN}
    bot = {"admins": [f"qq:{QQ_ADMIN}"], **sections.pop("bot", {})}
    return settings_for(tmp_path, database_url, chat, None, onebot=onebot, bot=bot, **sections)


def at_bot(text: str) -> list[dict[str, Any]]:
    return [{"type": "at", "data": {"qq": str(QQ_SELF)}}, *qq_text(" " + text)]


def sent_texts(impl: FakeOneBot, start: int = 0) -> list[str]:
    return [
        segment["data"]["text"]
        for sent in impl.sent[start:]
        for segment in sent["params"]["message"]
        if segment["type"] == "text"
    ]


async def qq_say(
    link: FakeLink, impl: FakeOneBot, message: list[dict[str, Any]], **who: Any
) -> str:
    """Send a group message and return the text of the bot's one reply to it."""
    before = len(impl.sent)
    who.setdefault("group_id", QQ_GROUP)
    await link.send_event(impl.group_message(message, **who))
    await impl.wait_sent(before + 1)
    (text,) = sent_texts(impl, before)
    return text


async def test_qq_bot_off_silences_a_group_until_on_across_a_restart(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    ignored: Callable[[int], Any],
) -> None:
    settings = qq_settings(tmp_path, database_url, chat)
    admin: dict[str, Any] = {"user_id": QQ_ADMIN, "nickname": "op"}
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with qq_daemon(settings, impl) as link:
            refused = await qq_say(link, impl, qq_text("/bot off"))
            assert refused == "Only admins can use /bot."
            off = await qq_say(link, impl, qq_text("/bot off"), **admin)
            assert off.startswith("I'm off in this group")
            await link.send_event(impl.group_message(at_bot("hello?")))
            await link.send_event(impl.group_message(qq_text("chatter while off")))
            await link.send_event(impl.group_message(at_bot("me too?"), **admin))
            await ignored(3)
            status = await qq_say(link, impl, qq_text("/bot status"), **admin)
            assert "Here: qq:group:30003 (group chat)." in status
            assert "Bot: off (/bot off); ignoring non-admins here." in status
            assert f"Last changed by qq:{QQ_ADMIN}" in status
        async with qq_daemon(settings, impl) as link:  # restarted: still off
            await link.send_event(impl.group_message(at_bot("after the restart?")))
            await ignored(4)
            on = await qq_say(link, impl, qq_text("/bot on"), **admin)
            assert on == "I'm on in this group again."
            answer = await qq_say(link, impl, at_bot("back?"))
    finally:
        await impl.close()
    assert answer == "echo: [alice]: back?"
    assert len(chat.requests) == 1
    turns = await storage.recent_turns("qq", f"group:{QQ_GROUP}", 50)
    assert [t.content for t in turns] == ["[alice]: back?", "echo: [alice]: back?"]


async def test_qq_blocked_user_is_ignored_in_groups_and_private(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    ignored: Callable[[int], Any],
) -> None:
    settings = qq_settings(tmp_path, database_url, chat, access={"blocked_users": ["qq:20005"]})
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with qq_daemon(settings, impl) as link:
            spam: dict[str, Any] = {"user_id": 20005, "nickname": "spam"}
            await link.send_event(impl.group_message(at_bot("buy now"), **spam))
            await link.send_event(impl.group_message(qq_text("buy now, no mention"), **spam))
            await link.send_event(impl.private_message(qq_text("buy now"), **spam))
            await link.send_event(impl.private_message(qq_text("/help"), **spam))
            await ignored(4)
            answer = await qq_say(link, impl, at_bot("hi"))
    finally:
        await impl.close()
    assert answer == "echo: [alice]: hi"
    assert [s["params"].get("group_id") for s in impl.sent] == [QQ_GROUP]
    group = await storage.recent_turns("qq", f"group:{QQ_GROUP}", 50)
    assert "buy now" not in " ".join(t.content for t in group)
    await nothing_stored(storage, "qq", "private:20005")


# -- per-chat persona and wake words ----------------------------------------------------------


async def test_qq_persona_applies_in_its_group_only_and_reset_removes_it(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI
) -> None:
    settings = qq_settings(tmp_path, database_url, chat)
    admin: dict[str, Any] = {"user_id": QQ_ADMIN, "nickname": "op"}
    persona = "Answer like a pirate.\nKeep it short."
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with qq_daemon(settings, impl) as link:
            done = await qq_say(link, impl, qq_text(f"/bot persona {persona}"), **admin)
            assert done == "Done: this persona applies to my answers in this chat only."
            await qq_say(link, impl, at_bot("ahoy?"))
            await qq_say(link, impl, at_bot("and here?"), group_id=OTHER_GROUP)
            before = len(impl.sent)
            await link.send_event(impl.private_message(qq_text("and in private?")))
            await impl.wait_sent(before + 1)
            shown = await qq_say(link, impl, qq_text("/bot status"), **admin)
            assert 'Persona: "Answer like a pirate.\nKeep it short."' in shown
            reset = await qq_say(link, impl, qq_text("/bot reset-settings"), **admin)
            assert reset.startswith("Done: this chat's persona and wake words are back")
            await qq_say(link, impl, at_bot("still a pirate?"))
    finally:
        await impl.close()
    here, elsewhere, private, after_reset = prompts(chat.requests)
    assert persona in here and f"In this chat (qq:group:{QQ_GROUP})" in here
    for other in (elsewhere, private, after_reset):
        assert "pirate" not in other and "Chat persona" not in other
    assert (await storage.chat_settings.get("qq", f"group:{QQ_GROUP}")).persona == ""


async def test_qq_wake_word_of_one_group_triggers_there_only(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI
) -> None:
    settings = qq_settings(tmp_path, database_url, chat)
    admin: dict[str, Any] = {"user_id": QQ_ADMIN, "nickname": "op"}
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with qq_daemon(settings, impl) as link:
            added = await qq_say(link, impl, qq_text("/bot wake Pancake"), **admin)
            assert added == (
                "Added Pancake. Wake words: chatterd (config); this group's own: Pancake."
            )
            answer = await qq_say(link, impl, qq_text("pancake, are you there?"))
            await link.send_event(
                impl.group_message(qq_text("pancake, over here?"), group_id=OTHER_GROUP)
            )

            async def stored_as_context() -> bool:
                turns = await storage.recent_turns("qq", f"group:{OTHER_GROUP}", 10)
                kinds.extend(t.kind for t in turns)
                return bool(turns)

            kinds: list[str] = []
            await until(stored_as_context)
            removed = await qq_say(link, impl, qq_text("/bot wake -pancake"), **admin)
            assert removed.startswith("Removed pancake.")
            before = len(impl.sent)
            await link.send_event(impl.group_message(qq_text("pancake?")))
            nudge = await qq_say(link, impl, at_bot("still there?"))
    finally:
        await impl.close()
    assert answer == "echo: [alice]: pancake, are you there?"
    assert kinds == ["context"]  # the other group only kept it as context: no answer
    assert sent_texts(impl, before) == [nudge]  # removed: "pancake?" was not answered
    assert [s["params"].get("group_id") for s in impl.sent].count(OTHER_GROUP) == 0


# -- HTTP: the same rules with http:<user_id> and http:<chat_id> -----------------------------


async def test_http_allowlists_for_private_chats_and_groups(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    ignored: Callable[[int], Any],
) -> None:
    http = {"enabled": True, "host": "127.0.0.1", "port": 0}
    access = {
        "groups": "allowlist",
        "allowed_groups": ["http:team"],
        "private": "allowlist",
        "allowed_users": ["http:app1"],
    }
    settings = settings_for(
        tmp_path, database_url, chat, http=http, bot={"admins": ["http:ops"]}, access=access
    )
    async with daemon(settings) as app:
        (channel,) = app.channels
        assert isinstance(channel, HttpChannel)
        url = f"http://127.0.0.1:{channel.port}/v1/chat"
        async with aiohttp.ClientSession() as session:

            async def say(user: str, text: str, group: str | None = None) -> Any:
                body: dict[str, Any] = {"user_id": user, "text": text, "chat_type": "private"}
                if group:
                    body |= {"chat_type": "group", "chat_id": group, "mentions_bot": True}
                async with session.post(url, json=body) as response:
                    assert response.status == 200
                    return (await response.json())["reply"]

            assert await say("app1", "hi") == "echo: [app1]: hi"
            assert await say("app2", "hi") is None
            assert await say("ops", "hi") == "echo: [ops]: hi"  # admins always
            assert await say("app2", "hi all", group="team") == "echo: [app2]: hi all"
            assert await say("app2", "hi all", group="other") is None
            assert await say("app2", "/bot allow", group="other") is None
            opened = await say("ops", "/bot allow", group="other")
            assert opened == "This group is allowed: I answer here from now on."
            assert await say("app2", "now?", group="other") == "echo: [app2]: now?"
    assert len(await ignored(3)) == 3
    await nothing_stored(storage, "http", "app2")
    other = await storage.recent_turns("http", "group:other", 10)
    assert [t.content for t in other] == ["[app2]: now?", "echo: [app2]: now?"]
    assert "[app2]: hi all" not in content_text(chat.requests[-1]["messages"][-1]["content"])
