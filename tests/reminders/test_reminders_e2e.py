"""Reminders end to end: the daemon (bot.wiring.app.App with its real channels) against the fake
Telegram Bot API, the fake OneBot implementation and a model that fails the whole time.

The wall clock is the test's (`Seams.clock`), so "in 10m" passes when the test says so;
the scheduler's loop itself runs for real and sends through the real channel code. What
is asserted is what crossed the wire.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot.config import Settings
from bot.wiring.app import Seams
from channels.http.push import SIGNATURE_HEADER
from channels.onebot.channel import OneBotChannel
from core.messages import ChatType, InboundMessage
from tests.fakes.manual_clock import ManualWallClock
from tests.fakes.onebot_impl import FakeLink, FakeOneBot, sent_text
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.rig import daemon, settings_for

BOT = "chatterd_test_bot"
ADMIN = user(1000, "Ada")
ALICE = user(1001, "Alice")
BOB = user(1002, "Bob")
GROUP = group_chat(-100500, "Tea party")
FORUM = group_chat(-100600, "Forum", forum=True)
TOPIC = 7
QQ_SELF = 10001
QQ_TOKEN = "onebot-test-token"
START = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)  # Berlin moves to summer time that night


def reminder_settings(
    tmp_path: Path, database_url: str, model: FakeOpenAI, **sections: Any
) -> Settings:
    return settings_for(
        tmp_path,
        database_url,
        model,
        bot={"admins": [f"telegram:{ADMIN['id']}", "qq:20001"], "timezone": "Europe/Berlin"},
        reminders={"tick_s": 0.05, "min_interval_s": 5},
        **sections,
    )


def command(text: str) -> list[dict[str, Any]]:
    return [entity("bot_command", text, text.split()[0])]


async def say(tg: FakeTelegram, chat: dict, who: dict, text: str, **fields: Any) -> str:
    """Send `text` (a command) and return the bot's answer."""
    before = len(tg.sent)
    tg.push_message(chat, who, text, entities=command(text), **fields)
    sent = await tg.wait_for("sendMessage", before + 1)
    return str(sent[before].params["text"])


@pytest.fixture
async def failing_model() -> AsyncIterator[FakeOpenAI]:
    """A model that answers every request with a 500: reminders must not need it."""
    async with FakeOpenAI(reply="unused") as fake:
        fake.fail(500, times=10_000)
        yield fake


def telegram_section(tg: FakeTelegram) -> dict[str, Any]:
    return {"enabled": True, "token": tg.token, "api_base_url": tg.root, "poll_stall_s": 3.0}


async def test_reminders_fire_in_a_dm_a_group_and_a_topic_without_the_model(
    tmp_path: Path, database_url: str, failing_model: FakeOpenAI, tg: FakeTelegram
) -> None:
    clock = ManualWallClock(START)
    settings = reminder_settings(
        tmp_path, database_url, failing_model, telegram=telegram_section(tg)
    )
    async with daemon(settings, Seams(clock=clock)) as app:
        dm = await say(tg, private_chat(ALICE), ALICE, "/remind in 10m call the bank")
        assert dm == "⏰ #1 set for 11:10 (Europe/Berlin, UTC+01:00): call the bank"
        in_group = tg.push_message(
            GROUP, ALICE, "/remind in 10m water the plants", entities=command("/remind")
        )
        answer = await tg.wait_for("sendMessage", 2)
        assert answer[1].params["text"].startswith("⏰ #2 set for 11:10")
        topic = await say(
            tg,
            FORUM,
            ALICE,
            "/remind 10m read the topic",
            message_thread_id=TOPIC,
            is_topic_message=True,
        )
        assert topic.startswith("⏰ #3 set for 11:10")
        # another member cannot cancel it; the owner sees it listed
        refused = await say(tg, GROUP, BOB, "/remind cancel #2")
        assert refused == "Only the person who set #2 (or an admin) can cancel it."
        assert "You have no reminders in this chat." == await say(tg, GROUP, BOB, "/remind list")
        listed = await say(tg, GROUP, ALICE, "/remind list")
        assert "#2 next 11:10" in listed and "water the plants" in listed

        before = len(tg.sent)
        clock.advance(minutes=10)
        fired = await tg.wait_for("sendMessage", before + 3)
        assert app.scheduler is not None
        for _ in range(3):  # more passes at the same instant: nothing may come twice
            await app.scheduler.tick()
        assert len(tg.sent) == before + 3

    by_chat = {call.params["chat_id"]: call.params for call in fired[before:]}
    assert by_chat[ALICE["id"]]["text"] == "⏰ call the bank"
    assert "reply_parameters" not in by_chat[ALICE["id"]]
    group = by_chat[GROUP["id"]]
    assert group["text"] == "⏰ water the plants"
    # addressed to its owner: a reply to the setting message and a mention of her
    assert group["reply_parameters"]["message_id"] == in_group["message_id"]
    (mention,) = [e for e in group["entities"] if e["type"] == "text_mention"]
    assert mention["user"]["id"] == ALICE["id"] and mention["offset"] == 0
    forum = by_chat[FORUM["id"]]
    assert forum["text"] == "⏰ read the topic" and forum["message_thread_id"] == TOPIC
    assert failing_model.requests == []  # no model call on any of these paths


async def test_chat_time_zone_limits_and_bad_input_get_one_line(
    tmp_path: Path, database_url: str, failing_model: FakeOpenAI, tg: FakeTelegram
) -> None:
    clock = ManualWallClock(START)
    settings = reminder_settings(
        tmp_path, database_url, failing_model, telegram=telegram_section(tg)
    )
    settings.reminders.max_per_user = 1  # type: ignore[misc]
    async with daemon(settings, Seams(clock=clock)) as app:
        assert "Only admins" in await say(tg, GROUP, BOB, "/bot timezone Asia/Shanghai")
        done = await say(tg, GROUP, ADMIN, "/bot timezone Asia/Shanghai")
        assert done.startswith("Done: reminders here use Asia/Shanghai")
        bad_zone = await say(tg, GROUP, ADMIN, "/bot timezone Mars/Olympus")
        assert bad_zone.startswith("Not changed:") and "\n" not in bad_zone
        ok = await say(tg, GROUP, BOB, "/remind tomorrow 09:00 call the bank")
        assert ok == "⏰ #1 set for 09:00 tomorrow (Asia/Shanghai, UTC+08:00): call the bank"
        for text, why in [
            ("/remind tomorrow 09:00 second one", "max_per_user"),
            ("/remind yesterday call", "can't read the time"),
            ("/remind 2020-01-01 10:00 old", "is in the past"),
            ("/remind every 2s spam", "min_interval_s"),
            # issue 35, item 7: these raised OverflowError (the generic apology)
            ("/remind in 99999999999 days far", "more than five years ahead"),
            ("/remind in 100000000000000000000 seconds far", "more than five years ahead"),
            ("/remind every 99999999999 days far", "more than five years ahead"),
            ("/remind 9999-12-31T23:59-05:00 far", "more than five years ahead"),
            ("/remind 0001-01-01T00:00+05:00 old", "is in the past"),
            (f'/remind cron "{"9" * 5000} * * * *" far', "cron minute"),
        ]:
            line = await say(tg, GROUP, BOB, text)
            assert line.startswith("Not set:") and why in line and "\n" not in line, line
        assert app.storage is not None
        stored = await app.storage.reminders.listing(platform="telegram")
        assert [r.text for r in stored] == ["call the bank"]


async def test_qq_group_reminder_ats_its_owner(
    tmp_path: Path, database_url: str, failing_model: FakeOpenAI
) -> None:
    clock = ManualWallClock(START)
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0, "access_token": QQ_TOKEN}
    settings = reminder_settings(tmp_path, database_url, failing_model, onebot=onebot)
    try:
        async with daemon(settings, Seams(clock=clock)) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link: FakeLink = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
            )
            await link.next_action("get_login_info")
            setting = impl.group_message(
                "/remind in 1h stretch", user_id=20002, group_id=30003, card="Alice"
            )
            await link.send_event(setting)
            confirm = await link.next_action("send_group_msg")
            assert sent_text(confirm).startswith("⏰ #1 set for 12:00 (Europe/Berlin")
            clock.advance(hours=1)
            fired = await link.next_action("send_group_msg", limit_s=10)
    finally:
        await impl.close()
    segments = fired["params"]["message"]
    assert fired["params"]["group_id"] == 30003
    assert {"type": "at", "data": {"qq": "20002"}} in segments
    assert sent_text(fired).strip() == "⏰ stretch"
    assert failing_model.requests == []


def task_model(body: dict[str, Any]) -> str:
    said = last_user_text(body) or ""
    return f"news summary for: {said}"


async def test_a_scheduled_task_is_answered_and_its_failure_reported(
    tmp_path: Path, database_url: str, tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualWallClock(START)
    async with FakeOpenAI(reply=task_model) as model:
        settings = reminder_settings(tmp_path, database_url, model, telegram=telegram_section(tg))
        async with daemon(settings, Seams(clock=clock)):
            refused = await say(tg, GROUP, BOB, "/schedule in 1h summarise the news")
            assert refused == "Only admins can schedule tasks; /remind sets a reminder."
            ok = await say(tg, GROUP, ADMIN, "/schedule every 1h summarise the news")
            assert ok.startswith("🗓 #1 scheduled every 3600s, first at 12:00")
            before = len(tg.sent)
            clock.advance(hours=1)
            answered = await tg.wait_for("sendMessage", before + 1)
            assert "news summary for: [Ada]: summarise the news" in answered[before].params["text"]
            # the next occurrence: the model is down, the chat is told, the log says so
            model.fail(500, times=100)
            clock.advance(hours=1)
            failed = await tg.wait_for("sendMessage", before + 2)
            assert "language model" in failed[before + 1].params["text"]
            for _ in range(100):
                if "scheduled task #1" in caplog.text:
                    break
                await asyncio.sleep(0.05)
    assert "scheduled task #1 in telegram:-100500 failed" in caplog.text


def tool_model(body: dict[str, Any]) -> str:
    """Turns "remind me ..." into the Remind marker, then confirms what the tool said."""
    said = last_user_text(body) or ""
    if "<tool_result" in said or "Not set" in said or "⏰" in said:
        return "Done: " + said.split("⏰", 1)[-1].split("(tell")[0].strip()
    return "Sure. [Remind: tomorrow 09:00 | call the bank]"


async def ask_the_tool(
    tmp_path: Path, database_url: str, tg: FakeTelegram, model: Any, words: str
) -> tuple[str, list[Any], FakeOpenAI]:
    """Alice's words to a daemon whose model (`model`) uses the Remind marker: the answer,
    the reminders stored, and the fake model (its requests)."""
    async with FakeOpenAI(reply=model) as fake:
        settings = reminder_settings(tmp_path, database_url, fake, telegram=telegram_section(tg))
        async with daemon(settings, Seams(clock=ManualWallClock(START))) as app:
            tg.push_message(private_chat(ALICE), ALICE, words)
            (answer,) = await tg.wait_for("sendMessage", 1)
            assert app.storage is not None
            stored = await app.storage.reminders.listing(platform="telegram")
    return str(answer.params["text"]), stored, fake


async def test_asking_in_plain_words_sets_the_reminder_through_the_tool(
    tmp_path: Path, database_url: str, tg: FakeTelegram
) -> None:
    said = "remind me tomorrow at 9 to call the bank"
    answer, (stored,), _ = await ask_the_tool(tmp_path, database_url, tg, tool_model, said)
    assert answer.startswith("Done: #1 set for 09:00 tomorrow (Europe/Berlin")
    assert stored.owner_id == str(ALICE["id"]) and stored.text == "call the bank"


def tool_message(request: Any) -> str:
    """The text of the last tool result the daemon sent back to the model."""
    sent = [m for m in request["messages"] if m["role"] == "tool"]
    return str(sent[-1]["content"])


async def test_native_mode_remind_takes_when_and_text(
    tmp_path: Path, database_url: str, tg: FakeTelegram
) -> None:
    """`[tools] mode = "native"`: `remind` is a function with `when` and `text`, both
    required; a call with both sets the reminder (and it fires), a call missing one is
    refused with an observation naming it, and nothing is set for it."""
    clock = ManualWallClock(START)
    async with FakeOpenAI(reply="unscripted") as model:
        model.reply_tool_calls([{"name": "remind", "arguments": {"when": "in 8s"}}])
        model.reply("Tell me what to remind you of.")
        model.reply_tool_calls(
            [{"name": "remind", "arguments": {"when": "in 8s", "text": "stretch"}}]
        )
        model.reply("Done.")
        settings = reminder_settings(
            tmp_path, database_url, model, telegram=telegram_section(tg), tools={"mode": "native"}
        )
        async with daemon(settings, Seams(clock=clock)) as app:
            tg.push_message(private_chat(ALICE), ALICE, "remind me in 8 seconds")
            await tg.wait_for("sendMessage", 1)
            assert app.storage is not None
            assert await app.storage.reminders.listing(platform="telegram") == []
            tg.push_message(private_chat(ALICE), ALICE, "to stretch")
            await tg.wait_for("sendMessage", 2)
            (stored,) = await app.storage.reminders.listing(platform="telegram")
            clock.advance(seconds=8)
            fired = await tg.wait_for("sendMessage", 3)
        offered = {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}
        schema = offered["remind"]["parameters"]
        refused, confirmed = tool_message(model.requests[1]), tool_message(model.requests[3])
    assert schema["required"] == ["when", "text"]
    assert set(schema["properties"]) == {"when", "text"}
    assert schema["properties"]["when"]["type"] == schema["properties"]["text"]["type"] == "string"
    assert "missing or empty: 'text'" in refused and "'when' and 'text'" in refused
    assert confirmed.startswith('<tool_result tool="remind" reminder="in 8s | stretch">')
    assert "#1 set for" in confirmed
    assert stored.owner_id == str(ALICE["id"]) and stored.text == "stretch"
    assert fired[2].params["text"] == "⏰ stretch"


def far_tool_model(body: dict[str, Any]) -> str:
    """Asks the tool for a reminder far past the limit, then repeats what it was told."""
    said = last_user_text(body) or ""
    if "<tool_result" in said or "Not set" in said:
        return "Told: " + said
    return "Sure. [Remind: in 99999999999 days | call the bank]"


async def test_the_tool_refuses_a_far_reminder_in_one_line_without_a_traceback(
    tmp_path: Path, database_url: str, tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    said = "remind me in a billion years"
    answer, stored, model = await ask_the_tool(tmp_path, database_url, tg, far_tool_model, said)
    assert stored == []
    assert "Not set: that is more than five years ahead." in (
        last_user_text(model.requests[-1]) or ""
    )
    assert answer.startswith("Told: ")
    assert "Traceback" not in caplog.text and "OverflowError" not in caplog.text


async def test_http_chats_get_reminders_only_through_a_signed_push(
    tmp_path: Path, database_url: str, failing_model: FakeOpenAI
) -> None:
    received: list[tuple[bytes, str, str]] = []
    arrived = asyncio.Event()

    async def push(request: web.Request) -> web.Response:
        headers = request.headers
        signed, key = headers.get(SIGNATURE_HEADER, ""), headers.get("Idempotency-Key", "")
        received.append((await request.read(), signed, key))
        arrived.set()
        return web.json_response({"ok": True})

    receiver = web.Application()
    receiver.router.add_post("/push", push)
    runner = web.AppRunner(receiver)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    push_url = f"http://127.0.0.1:{runner.addresses[0][1]}/push"
    clock = ManualWallClock(START)
    token = "http-token-1"
    try:
        for url in (None, push_url):
            http = {"enabled": True, "port": 0, "token": token, "push_url": url}
            settings = reminder_settings(tmp_path, database_url, failing_model, http=http)
            async with daemon(settings, Seams(clock=clock)) as app:
                (channel,) = app.channels
                body = {
                    "user_id": "u1",
                    "chat_type": "private",
                    "text": "/remind in 1m stand up",
                    "message_id": f"m-{url is None}",
                }
                async with aiohttp.ClientSession() as session:
                    async with session.post(
                        f"http://127.0.0.1:{channel.port}/v1/chat",  # type: ignore[attr-defined]
                        json=body,
                        headers={"Authorization": f"Bearer {token}"},
                    ) as response:
                        reply = (await response.json())["reply"]
                if url is None:
                    assert reply == (
                        "Not set: I can't send anything unasked in http chats (set [http] "
                        "push_url to allow it), so reminders cannot be set here."
                    )
                    continue
                assert reply.startswith("⏰ #1 set for 11:01")
                clock.advance(minutes=1)
                await asyncio.wait_for(arrived.wait(), 10)
    finally:
        await runner.cleanup()
    ((raw, signed, key),) = received
    assert json.loads(raw)["chat_id"] == "u1" and json.loads(raw)["chat_type"] == "private"
    assert json.loads(raw)["text"] == "⏰ stand up"
    assert json.loads(raw)["reminder_id"] == 1
    # the occurrence (reminder id + due time): a receiver's key to drop a repeated send
    assert json.loads(raw)["occurrence_id"] == key == "reminder:1:20260328T100100Z"
    expected = hmac.new(token.encode(), raw, hashlib.sha256).hexdigest()
    assert signed == f"sha256={expected}"


async def test_a_group_switched_off_gets_no_reminder_and_a_blocked_owner_none_either(
    tmp_path: Path, database_url: str, failing_model: FakeOpenAI, tg: FakeTelegram
) -> None:
    clock = ManualWallClock(START)
    settings = reminder_settings(
        tmp_path, database_url, failing_model, telegram=telegram_section(tg)
    )
    async with daemon(settings, Seams(clock=clock)) as app:
        await say(tg, GROUP, ALICE, "/remind in 10m water the plants")
        await say(tg, private_chat(BOB), BOB, "/remind in 10m pay rent")
        assert (await say(tg, GROUP, ADMIN, "/bot off")).startswith("I'm off in this group")
        assert app.storage is not None
        before = len(tg.sent)
        clock.advance(minutes=11)
        for _ in range(200):  # both occurrences settled: neither may be sent
            runs = [await app.storage.reminders.runs_of(n) for n in (1, 2)]
            if all(r and r[0].state != "claimed" for r in runs):
                break
            await asyncio.sleep(0.05)
        # Bob's DM reminder is delivered; the switched-off group's is skipped
        assert [r[0].state for r in runs] == ["skipped", "delivered"]
        await tg.wait_for("sendMessage", before + 1)
    assert [s["text"] for s in tg.sent[before:]] == ["⏰ pay rent"]

    # Bob blocked by the operator (a restart with [access] blocked_users): his stop
    settings = reminder_settings(
        tmp_path,
        database_url,
        failing_model,
        telegram=telegram_section(tg),
        access={"blocked_users": [f"telegram:{BOB['id']}"]},
    )
    async with daemon(settings, Seams(clock=clock)) as app:
        assert app.storage is not None and app.reminders is not None
        bob = InboundMessage(
            platform="telegram",
            chat_id=str(BOB["id"]),
            chat_type=ChatType.PRIVATE,
            sender_id=str(BOB["id"]),
            sender_name="Bob",
            text="",
        )
        done = await app.reminders.set_from_text(bob, "in 1m again")  # set before the block
        clock.advance(minutes=2)
        for _ in range(200):
            runs = await app.storage.reminders.runs_of(done.reminder.id)
            if runs and runs[0].state != "claimed":
                break
            await asyncio.sleep(0.05)
        assert runs[0].state == "skipped"
    assert [s["text"] for s in tg.sent[before:]] == ["⏰ pay rent"]
