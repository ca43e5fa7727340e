"""Usage and quotas through the real daemon: fake Telegram, fake OneBot, fake models.

What is asserted is what crossed the wire (Bot API calls, OneBot actions, model
requests) and what the usage counters hold, on SQLite or PostgreSQL. The daemon's wall
clock is injected, so a day boundary and "an hour later" are crossed without sleeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.wiring.app import Seams
from channels.onebot.channel import OneBotChannel
from core.messages import ChatType, InboundMessage
from core.text.tokens import count_messages, get_counter
from memory.turns.store import SqlStorage
from memory.usage.types import UsageScope, UsageTotals
from tests.channels.test_channel_e2e import PNG, telegram_section
from tests.fakes.manual_clock import ManualWallClock
from tests.fakes.onebot_impl import FakeOneBot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.rig import answer_of, daemon, settings_for

BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice")
BOB = user(1002, "Bob")
OPS = user(1999, "Ops")
GROUP = group_chat(-100500, "Tea party")
START = datetime(2026, 3, 14, 21, 30, tzinfo=UTC)
TODAY = START.date()
QQ_SELF = 10001
QQ_TOKEN = "onebot-test-token"


class LogWaiter(logging.Handler):
    """Counts log lines containing `needle`; `await waiter.seen(n)` returns once n were."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.INFO)
        self.needle = needle
        self.count = 0
        self._changed = asyncio.Condition()
        self._loop = asyncio.get_running_loop()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.count += 1
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._notify()))

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def seen(self, count: int, within_s: float = 5.0) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.count >= count), within_s)


@pytest.fixture
async def quota_log() -> AsyncIterator[LogWaiter]:
    waiter = LogWaiter("token quota")
    logger = logging.getLogger("core.turn.gate")
    logger.addHandler(waiter)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield waiter
    finally:
        logger.removeHandler(waiter)
        logger.setLevel(previous)


@pytest.fixture
def clock() -> ManualWallClock:
    return ManualWallClock(START)


FAKE_CHAT = {"reply": "plain answer"}  # served by conftest.py's `chat` fixture


def command(text: str) -> list[dict[str, Any]]:
    return [entity("bot_command", text, text.split()[0])]


async def say(tg: FakeTelegram, chat: dict[str, Any], who: dict[str, Any], text: str) -> str:
    """Push one message and return the text of the bot's next sendMessage."""
    before = len(tg.calls_of("sendMessage"))
    entities = command(text) if text.startswith("/") else None
    if chat["type"] != "private" and not text.startswith("/"):
        text = f"@{BOT} {text}"
        entities = [entity("mention", text, f"@{BOT}")]
    tg.push_message(chat, who, text, **({"entities": entities} if entities else {}))
    sent = await tg.wait_for("sendMessage", before + 1)
    return str(sent[before].params["text"])


def by_purpose(groups: list[Any]) -> dict[str, UsageTotals]:
    return {group.key: group.totals for group in groups}


# -- what is counted -----------------------------------------------------------------------


async def test_a_tool_round_is_two_reply_calls_and_usage_shows_their_sum(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
    clock: ManualWallClock,
) -> None:
    chat.reply("Sure! [Remember: likes green tea]", usage=(120, 7))
    chat.reply("I'll keep that in mind.", usage=(150, 9))
    chat.reply("Tea it is.", usage=(40, 4))
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
    async with daemon(settings, Seams(clock=clock)):
        assert await say(tg, private_chat(ALICE), ALICE, "I like green tea") == (
            "I'll keep that in mind."
        )
        assert len(chat.requests) == 2  # the [Remember] round, then the answer
        clock.advance(days=-1)  # yesterday's turn: in the month, not today
        assert await say(tg, private_chat(ALICE), ALICE, "and yesterday?") == "Tea it is."
        clock.advance(days=1)
        shown = await say(tg, private_chat(ALICE), ALICE, "/usage")

    alice = UsageScope("telegram", user_id=str(ALICE["id"]))
    today = await storage.usage.totals(TODAY, TODAY, alice)
    assert today == UsageTotals(prompt_tokens=270, completion_tokens=16, calls=2)
    purposes = by_purpose(await storage.usage.grouped("purpose", TODAY, TODAY))
    models = by_purpose(await storage.usage.grouped("model", TODAY, TODAY))
    assert set(purposes) == {"reply"} and set(models) == {"chat-model"}
    chat_scope = UsageScope("telegram", chat_id=str(ALICE["id"]))
    assert await storage.usage.totals(TODAY, TODAY, chat_scope) == today
    assert shown.splitlines() == [
        "Your tokens today: 286 tokens in 2 model calls",
        "This month: 330 tokens in 3 model calls",
    ]


async def test_a_server_without_usage_is_counted_by_us_and_flagged(
    tmp_path: Path, database_url: str, storage: SqlStorage, clock: ManualWallClock
) -> None:
    async with FakeOpenAI(reply="plain answer", model="quiet-model", send_usage=False) as quiet:
        settings = settings_for(tmp_path, database_url, quiet)
        async with daemon(settings, Seams(clock=clock)) as app:
            assert app.processor is not None
            reply = await answer_of(
                app, InboundMessage("http", "u1", ChatType.PRIVATE, "u1", "Ann", "hello")
            )
    assert reply == "plain answer"
    counter = get_counter(settings.context.tokenizer)
    (request,) = quiet.requests
    expected = UsageTotals(
        prompt_tokens=count_messages(request["messages"], counter),
        completion_tokens=counter.count("plain answer"),
        calls=1,
        estimated_calls=1,
    )
    assert await storage.usage.totals(TODAY, TODAY, UsageScope("http", user_id="u1")) == expected
    assert expected.prompt_tokens > 100  # the system prompt was counted, not just "hello"


async def test_calls_of_a_turn_that_then_failed_still_count(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI, clock: ManualWallClock
) -> None:
    chat.reply("[Remember: likes tea]", usage=(60, 5))
    chat.fail(500)
    settings = settings_for(tmp_path, database_url, chat)
    async with daemon(settings, Seams(clock=clock)) as app:
        assert app.processor is not None
        reply = await answer_of(
            app, InboundMessage("http", "u1", ChatType.PRIVATE, "u1", "Ann", "I like tea")
        )
    assert reply is not None and reply.startswith("Sorry")
    assert await storage.usage.totals(TODAY, TODAY) == UsageTotals(60, 5, 1, 0)


async def test_an_image_description_counts_as_vision_for_the_sender(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
    clock: ManualWallClock,
) -> None:
    chat.reply("a bicycle, nice", usage=(200, 5))
    async with FakeOpenAI(reply="a red bicycle", model="vision-model") as vision:
        vision.reply("a red bicycle", usage=(900, 6))
        settings = settings_for(tmp_path, database_url, chat, vision, telegram=telegram_section(tg))
        async with daemon(settings, Seams(clock=clock)):
            photo = tg.add_photo(PNG)
            before = len(tg.calls_of("sendMessage"))
            tg.push_message(private_chat(ALICE), ALICE, None, caption="what?", photo=photo)
            await tg.wait_for("sendMessage", before + 1)

    alice = UsageScope("telegram", user_id=str(ALICE["id"]), chat_id=str(ALICE["id"]))
    purposes = by_purpose(await storage.usage.grouped("purpose", TODAY, TODAY, alice))
    assert purposes == {"vision": UsageTotals(900, 6, 1, 0), "reply": UsageTotals(200, 5, 1, 0)}
    models = by_purpose(await storage.usage.grouped("model", TODAY, TODAY))
    assert set(models) == {"vision-model", "chat-model"}


async def test_compaction_counts_for_the_sender_whose_turn_made_it_due(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI, clock: ManualWallClock
) -> None:
    filler = " ".join(f"word{i}" for i in range(80))
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        llm={"context_window": 2500, "reply_tokens": 100},
        context={"compaction_min_turns": 2},
    )
    summaries: list[int] = []
    async with daemon(settings, Seams(clock=clock)) as app:
        assert app.processor is not None
        for n in range(30):
            sender = "bob" if n % 2 else "ann"
            message = InboundMessage(
                "http", "g1", ChatType.GROUP, sender, sender, f"{n} {filler}", mentions_bot=True
            )
            await answer_of(app, message)
            await app.processor.settle()  # a summary being written finishes first
            asked = [r for r in chat.requests if "running summary" in str(r["messages"][0])]
            summaries.append(len(asked))
            if asked:
                break
    assert summaries[-1] == 1, "the chat never outgrew its window"
    trigger = "bob" if (len(summaries) - 1) % 2 else "ann"
    folded = by_purpose(
        await storage.usage.grouped("purpose", TODAY, TODAY, UsageScope("http", user_id=trigger))
    )
    assert folded["compaction"].calls == 1 and folded["compaction"].tokens > 0
    everyone = by_purpose(await storage.usage.grouped("purpose", TODAY, TODAY))
    assert everyone["compaction"] == folded["compaction"]  # nobody else paid for it
    assert everyone["reply"].calls == len(summaries)


# -- who may look ----------------------------------------------------------------------------


async def test_usage_group_and_top_are_for_admins_only(
    tmp_path: Path,
    database_url: str,
    chat: FakeOpenAI,
    tg: FakeTelegram,
    clock: ManualWallClock,
) -> None:
    chat.reply("one", usage=(100, 10))
    chat.reply("two", usage=(50, 5))
    ops = {"admins": [f"telegram:{OPS['id']}"]}
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg), bot=ops)
    async with daemon(settings, Seams(clock=clock)):
        assert await say(tg, GROUP, ALICE, "hello") == "one"
        assert await say(tg, private_chat(BOB), BOB, "hi") == "two"
        refusal = "Only admins can see a group's or everyone's usage; /usage shows yours."
        assert await say(tg, GROUP, ALICE, "/usage group") == refusal
        assert await say(tg, GROUP, ALICE, "/usage top") == refusal
        group = await say(tg, GROUP, OPS, "/usage group")
        before = len(tg.calls_of("sendMessage"))
        tg.push_message(GROUP, OPS, "/usage top", entities=command("/usage top"))
        top_call = (await tg.wait_for("sendMessage", before + 1))[before]
        assert "Your tokens today: 0 tokens" in await say(tg, GROUP, OPS, "/usage")

    assert group.splitlines() == [
        "This group's tokens today: 110 tokens in 1 model call",
        "This month: 110 tokens in 1 model call",
    ]
    assert top_call.params["chat_id"] == OPS["id"]  # other people's numbers: privately
    assert top_call.params["text"].splitlines() == [
        "Everyone this month: 165 tokens in 2 model calls",
        "",
        "Top users this month:",
        f"1. telegram:{ALICE['id']} — 110 tokens",
        f"2. telegram:{BOB['id']} — 55 tokens",
        "",
        "Top chats this month:",
        f"1. telegram:{GROUP['id']} — 110 tokens",
        f"2. telegram:{BOB['id']} — 55 tokens",
    ]


# -- quotas ----------------------------------------------------------------------------------


async def test_user_quota_one_notice_an_hour_admins_exempt_and_a_new_day_resets(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    tg: FakeTelegram,
    clock: ManualWallClock,
    quota_log: LogWaiter,
) -> None:
    chat.set_default("plain answer")
    chat.reply("first answer", usage=(80, 30))  # 110 tokens: over the 100 allowed
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        telegram=telegram_section(tg),
        bot={"admins": [f"telegram:{OPS['id']}"], "rate_limit_per_min": 0},
        limits={"user_tokens_per_day": 100},
    )
    alice = private_chat(ALICE)
    async with daemon(settings, Seams(clock=clock)):
        assert await say(tg, alice, ALICE, "hello") == "first answer"
        assert await say(tg, alice, ALICE, "again") == (
            "You have used your daily token allowance; it resets at 00:00 UTC (in 2 h 30 min)."
        )
        sends = len(tg.calls_of("sendMessage"))
        tg.push_message(alice, ALICE, "and again")  # within the hour: silence
        await quota_log.seen(2)
        assert len(tg.calls_of("sendMessage")) == sends
        assert "Your tokens today: 110 tokens" in await say(tg, alice, ALICE, "/usage")
        assert await say(tg, private_chat(OPS), OPS, "hi") == "plain answer"  # exempt
        clock.advance(hours=1, minutes=1)  # 22:31: told once more, the day is not over
        assert "in 1 h 29 min" in await say(tg, alice, ALICE, "still there?")
        clock.advance(hours=1, minutes=30)  # 00:01 the next day: a fresh allowance
        assert await say(tg, alice, ALICE, "good morning") == "plain answer"

    assert len(chat.requests) == 3  # hello, the admin's hi, good morning
    asked = [r["messages"][-1]["content"] for r in chat.requests]
    assert not any("again" in text or "still there" in text for text in asked)
    accepted = [entry.text for entry in await storage.intake.listing(limit=20)]
    assert sorted(accepted) == ["good morning", "hello", "hi"]  # refused ones never stored
    assert quota_log.count == 3


async def test_qq_group_quota_stops_the_group_not_its_members_private_chats(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    clock: ManualWallClock,
    quota_log: LogWaiter,
) -> None:
    chat.set_default("plain answer")
    chat.reply("group answer", usage=(150, 50))
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0, "access_token": QQ_TOKEN}
    settings = settings_for(
        tmp_path, database_url, chat, onebot=onebot, limits={"group_tokens_per_day": 200}
    )

    def in_group(user_id: int, text: str) -> dict[str, Any]:
        at = {"type": "at", "data": {"qq": str(QQ_SELF)}}
        body = [at, {"type": "text", "data": {"text": f" {text}"}}]
        return impl.group_message(body, user_id=user_id, group_id=30003, nickname=str(user_id))

    try:
        async with daemon(settings, Seams(clock=clock)) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
            )
            await link.next_action("get_login_info")
            await link.send_event(in_group(20002, "hello"))
            await impl.wait_sent(1)
            await link.send_event(in_group(20003, "me too"))  # another member, same group
            await impl.wait_sent(2)
            await link.send_event(in_group(20003, "please?"))
            await quota_log.seen(2)
            private = impl.private_message(
                [{"type": "text", "data": {"text": "just us"}}], user_id=20003
            )
            await link.send_event(private)
            await impl.wait_sent(3)
    finally:
        await impl.close()

    def text_of(sent: dict[str, Any]) -> str:
        return "".join(s["data"].get("text", "") for s in sent["params"]["message"])

    texts = [text_of(sent) for sent in impl.sent]
    assert texts == [
        "group answer",
        "This group has used its daily token allowance; it resets at 00:00 UTC (in 2 h 30 min).",
        "plain answer",
    ]
    assert impl.sent[2]["params"]["user_id"] == 20003
    spent = await storage.usage.spent_on(TODAY, "qq", "group:30003", "20003")
    assert spent.chat == 200  # all of it Alice's (20002) turn
    assert 0 < spent.user == spent.everyone - 200  # 20003's own: the private chat only
