"""Bursts through the real daemon: Telegram (FakeTelegram) in, the model (FakeOpenAI) out.

A sender's quick messages are one model call and one reply; the burst is cut at
`burst_max_ms`; a command inside it is answered alone; `burst_ms = 0` keeps one reply per
message. Nothing waits on a clock: each test waits for the intake to be settled (every
accepted message answered), then counts what crossed the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.wiring.app import App
from channels.onebot.channel import OneBotChannel
from core.messages import ChatType
from core.turn.bursts import BurstOptions, BurstWindow, in_arrival_order, leading_burst
from memory.turns.store import SqlStorage
from memory.turns.types import IntakeDraft, IntakeEntry
from tests.channels.test_channel_e2e import PNG, QQ_SELF, QQ_TOKEN, telegram_section
from tests.fakes.onebot_impl import FakeLink, FakeOneBot
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, last_user_text
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.rig import daemon, settings_for

BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice")
BOB = user(1002, "Bob")
GROUP = group_chat(-100700, "Burst club")
GAP_S = 0.3  # how far apart the messages of a burst are sent
DESCRIPTION = "a red bicycle"


@dataclass
class Burster:
    """One test's fakes and database; `daemon(...)` runs the daemon on them."""

    tmp_path: Path
    database_url: str
    storage: SqlStorage
    chat: FakeOpenAI
    tg: FakeTelegram

    def daemon(
        self, vision: FakeOpenAI | None = None, **sections: dict[str, Any]
    ) -> AbstractAsyncContextManager[App]:
        telegram = telegram_section(self.tg)
        settings = settings_for(
            self.tmp_path, self.database_url, self.chat, vision, telegram=telegram, **sections
        )
        return daemon(settings)


@pytest.fixture
async def rig(
    tmp_path: Path, database_url: str, storage: SqlStorage, tg: FakeTelegram
) -> AsyncIterator[Burster]:
    async with FakeOpenAI(reply="got it", model="chat-model") as chat:
        yield Burster(tmp_path, database_url, storage, chat, tg)


def mentioning(text: str) -> dict[str, Any]:
    """A group message that @-mentions the bot (so it triggers an answer)."""
    said = f"@{BOT} {text}"
    return {"text": said, "entities": [entity("mention", said, f"@{BOT}")]}


async def settled(storage: SqlStorage, accepted: int, within_s: float = 20.0) -> list[IntakeEntry]:
    """Wait until `accepted` messages are in the intake and none is open any more."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        rows = await storage.intake.listing(limit=100)
        if len(rows) >= accepted and all(r.state in ("delivered", "failed") for r in rows):
            return sorted(rows, key=lambda r: r.id)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not settled: {[(r.text, r.state) for r in rows]}")
        await asyncio.sleep(0.05)


def asked(request: RecordedRequest) -> str:
    return last_user_text(request.json or {}) or ""


async def test_a_four_message_group_burst_is_one_request_and_one_reply(rig: Burster) -> None:
    """The issue's burst: "hey", "look at this", a picture, "what is it?" -> one turn."""
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    async with FakeOpenAI(reply=DESCRIPTION, model="vision-model") as vision:
        async with rig.daemon(vision, groups={"burst_ms": 1500, "burst_max_ms": 6000}):
            sent: list[dict[str, Any]] = []
            for i, text in enumerate(["hey", "look at this", "", "what is it?"]):
                if i:
                    await asyncio.sleep(GAP_S)
                if text:
                    sent.append(tg.push_message(GROUP, ALICE, **mentioning(text)))
                else:  # a photo whose caption mentions the bot
                    photo = tg.add_photo(PNG)
                    said = mentioning("this one")
                    sent.append(
                        tg.push_message(
                            GROUP,
                            ALICE,
                            None,
                            photo=photo,
                            caption=said["text"],
                            caption_entities=said["entities"],
                        )
                    )
            rows = await settled(storage, 4)
            replies = await tg.wait_for("sendMessage", 1)

    assert len(chat.requests) == 1, [asked(r) for r in chat.requests]
    content = asked(chat.requests[0])
    parts = ["hey", "look at this", "this one", f"(Image 1: {DESCRIPTION})", "what is it?"]
    places = [content.find(part) for part in parts]
    assert -1 not in places and places == sorted(places), content
    (reply,) = replies
    assert reply.params["text"] == "got it"
    assert reply.params["reply_parameters"]["message_id"] == sent[-1]["message_id"]
    # Each message keeps its own stored turn, in order, before the one reply.
    turns = await storage.recent_turns("telegram", str(GROUP["id"]), 10)
    assert [t.role for t in turns] == ["user"] * 4 + ["assistant"]
    assert [t.platform_message_id for t in turns[:4]] == [str(m["message_id"]) for m in sent]
    # All four intake rows settled by the one reply, which only the last one carries.
    assert [r.state for r in rows] == ["delivered"] * 4
    assert {r.reply_turn_id for r in rows} == {turns[-1].id}
    assert [r.user_turn_id for r in rows] == [t.id for t in turns[:4]]


async def test_a_burst_longer_than_burst_max_is_cut_there(rig: Burster) -> None:
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    sections: dict[str, Any] = dict(private={"burst_ms": 1500, "burst_max_ms": 1000})
    words = [f"part{i}" for i in range(6)]
    async with rig.daemon(**sections):
        for i, word in enumerate(words):
            if i:
                await asyncio.sleep(GAP_S)
            tg.push_message(private_chat(ALICE), ALICE, word)
        await settled(storage, len(words))

    contents = [asked(r) for r in chat.requests]
    # 6 messages 0.3 s apart span 1.5 s: more than one 1 s burst, fewer than 6 turns.
    assert 2 <= len(contents) < len(words), contents
    # Every message answered in exactly one request, the requests in the order sent.
    found = [[w for w in words if w in content] for content in contents]
    assert [w for group in found for w in group] == words, contents
    assert "part0" in contents[0] and "part5" not in contents[0]


async def test_a_command_inside_a_burst_is_answered_on_its_own(rig: Burster) -> None:
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    async with rig.daemon(private={"burst_ms": 1500}):
        tg.push_message(private_chat(ALICE), ALICE, "first thought")
        await asyncio.sleep(GAP_S)
        help_text = "/help"
        tg.push_message(
            private_chat(ALICE),
            ALICE,
            help_text,
            entities=[entity("bot_command", help_text, help_text)],
        )
        await asyncio.sleep(GAP_S)
        tg.push_message(private_chat(ALICE), ALICE, "second thought")
        await settled(storage, 2)
        sends = await tg.wait_for("sendMessage", 2)

    (request,) = chat.requests
    content = asked(request)
    assert "first thought" in content and "second thought" in content
    assert "/help" not in str(request["messages"])
    texts = [s.params["text"] for s in sends]
    assert texts.count("got it") == 1 and len(texts) == 2  # the model's one, /help's own


async def test_burst_ms_zero_answers_each_message_on_its_own(rig: Burster) -> None:
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    async with rig.daemon(private={"burst_ms": 0}, groups={"burst_ms": 0}):
        for word in ["one", "two", "three"]:
            tg.push_message(private_chat(BOB), BOB, word)
        await settled(storage, 3)
        sends = await tg.wait_for("sendMessage", 3)
    assert [asked(r).split(": ", 1)[1] for r in chat.requests] == ["one", "two", "three"]
    assert len(sends) == 3


def _entry(n: int, sender: str, at_s: float, state: str = "pending") -> IntakeEntry:
    start = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    draft = IntakeDraft("telegram", "-1", "group", sender, "S", f"m{n}", str(n))
    return IntakeEntry(
        id=n, platform=draft.platform, chat_id=draft.chat_id, chat_type=draft.chat_type,
        sender_id=sender, sender_name="S", text=draft.text, platform_message_id=str(n),
        thread_id=None, payload={}, state=state, attempts=0,  # type: ignore[arg-type]
        user_turn_id=None, reply_turn_id=None, delivery={},
        received_at=start + timedelta(seconds=at_s), updated_at=start,
    )  # fmt: skip


def test_recovery_merges_what_the_live_path_would_have_merged() -> None:
    options = BurstOptions(group=BurstWindow(1500, 6000), private=BurstWindow(1000))
    run = [_entry(1, "a", 0), _entry(2, "a", 1), _entry(3, "a", 2), _entry(4, "a", 30)]
    assert [e.id for e in leading_burst(run, options)] == [1, 2, 3]  # a long pause cuts it
    other = [_entry(1, "a", 0), _entry(2, "b", 0.5)]
    assert [e.id for e in leading_burst(other, options)] == [1]  # another sender cuts it
    spread = [_entry(i, "a", i * 1.4) for i in range(1, 12)]
    assert len(leading_burst(spread, options)) < len(spread)  # the max cuts it
    off = BurstOptions(group=BurstWindow(0))
    assert [e.id for e in leading_burst(run, off)] == [1]
    assert options.window_s(ChatType.PRIVATE) == 1.0


async def test_a_message_during_the_answer_is_the_next_turn(rig: Burster) -> None:
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    async with rig.daemon(private={"burst_ms": 300}):
        chat.pause()
        tg.push_message(private_chat(ALICE), ALICE, "early words")
        await chat.wait_for_requests(1, timeout_s=10)  # the answer is being written
        tg.push_message(private_chat(ALICE), ALICE, "late words")
        await storage_has(storage, 2)
        chat.resume()
        await settled(storage, 2)
        sends = await tg.wait_for("sendMessage", 2)
    first, second = (asked(r) for r in chat.requests)
    assert "early words" in first and "late words" not in first
    assert "late words" in second and "early words" not in second
    assert len(sends) == 2


async def storage_has(storage: SqlStorage, accepted: int, within_s: float = 10.0) -> None:
    """Wait until `accepted` messages are in the intake (whatever their state)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while len(await storage.intake.listing(limit=100)) < accepted:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"fewer than {accepted} messages accepted")
        await asyncio.sleep(0.05)


async def test_a_failed_model_call_fails_the_whole_burst_once(rig: Burster) -> None:
    """One apology for the burst; every row `failed` (none left for recovery to retry)."""
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    chat.fail(500, "the model is down")
    async with rig.daemon(private={"burst_ms": 1500}):
        tg.push_message(private_chat(BOB), BOB, "question, part one")
        await asyncio.sleep(GAP_S)
        tg.push_message(private_chat(BOB), BOB, "question, part two")
        rows = await settled(storage, 2)
        (apology,) = await tg.wait_for("sendMessage", 1)
    assert len(chat.requests) == 1
    assert [r.state for r in rows] == ["failed", "failed"]
    assert apology.params["text"].startswith("Sorry")
    turns = await storage.recent_turns("telegram", str(BOB["id"]), 10)
    said = [t.content.split(": ", 1)[1] for t in turns]
    assert said == ["question, part one", "question, part two"]


async def test_a_wake_word_then_three_plain_lines_are_one_request_and_one_reply(
    rig: Burster,
) -> None:
    """Only the first line calls the bot; the same sender's next lines, 300 ms apart, join
    its burst. Another member's line in the middle stays context, answered by nothing."""
    tg, chat, storage = rig.tg, rig.chat, rig.storage
    groups = {"burst_ms": 1500, "burst_max_ms": 6000, "wake_words": ["chatterbot"]}
    lines = [
        (ALICE, "chatterbot, got a minute?"),
        (ALICE, "we are planning a trip"),
        (BOB, "I can't come"),
        (ALICE, "probably this friday"),
        (ALICE, "where should we go?"),
    ]
    async with rig.daemon(groups=groups):
        sent = []
        for i, (who, text) in enumerate(lines):
            if i:
                await asyncio.sleep(GAP_S)
            sent.append(tg.push_message(GROUP, who, text))
        rows = await settled(storage, 4)
        (reply,) = await tg.wait_for("sendMessage", 1)
    # Only an accepted message is ever answered: Bob's line made no row, the four one turn.
    assert len(rows) == 4 and len({r.reply_turn_id for r in rows}) == 1
    assert len(chat.requests) == 1, [asked(r) for r in chat.requests]
    content = asked(chat.requests[0])
    alices = [text for who, text in lines if who is ALICE]
    places = [content.find(text) for text in alices]
    assert -1 not in places and places == sorted(places), content
    assert "I can't come" not in content
    assert reply.params["reply_parameters"]["message_id"] == sent[-1]["message_id"]
    assert len(tg.calls_of("sendMessage")) == 1
    turns = await storage.recent_turns("telegram", str(GROUP["id"]), 10)
    bobs = [t for t in turns if "I can't come" in t.content]
    assert [(t.role, t.kind) for t in bobs] == [("user", "context")]


async def test_plain_lines_with_no_call_before_them_stay_context(rig: Burster) -> None:
    """A person's plain lines start nothing: no request, no reply, all kept as context."""
    async with rig.daemon(groups={"burst_ms": 1500}):
        for i, text in enumerate(["we are planning a trip", "where should we go?"]):
            if i:
                await asyncio.sleep(GAP_S)
            rig.tg.push_message(GROUP, ALICE, text)
        await turns_stored(rig.storage, 2)
        # Decided as context before they were stored: neither was accepted to be answered.
        assert await rig.storage.intake.listing() == []
    turns = await rig.storage.recent_turns("telegram", str(GROUP["id"]), 10)
    assert [t.kind for t in turns] == ["context", "context"]
    assert rig.chat.requests == [] and rig.tg.calls_of("sendMessage") == []


async def turns_stored(storage: SqlStorage, count: int, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while len(await storage.recent_turns("telegram", str(GROUP["id"]), 10)) < count:
        assert asyncio.get_running_loop().time() < deadline, "turns not stored"
        await asyncio.sleep(0.05)


async def test_a_qq_group_burst_takes_the_senders_plain_line_but_not_anothers(
    rig: Burster,
) -> None:
    """Over OneBot: an @-message, the same sender's plain line, another member's plain
    line, then the sender's @-message: the sender's three are one request and one reply
    quoting the last; the other member's line is context."""
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0, "access_token": QQ_TOKEN}
    at_bot = {"type": "at", "data": {"qq": str(QQ_SELF)}}
    said = [
        (20002, [at_bot, qq_text(" first")]),
        (20002, [qq_text("then this")]),
        (20003, [qq_text("just chatting")]),
        (20002, [at_bot, qq_text(" last")]),
    ]
    try:
        async with rig.daemon(onebot=onebot, groups={"burst_ms": 1500}) as app:
            (channel,) = [c for c in app.channels if isinstance(c, OneBotChannel)]
            link: FakeLink = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
            )
            await link.next_action("get_login_info")
            events = []
            for i, (who, segments) in enumerate(said):
                if i:
                    await asyncio.sleep(GAP_S)
                events.append(impl.group_message(segments, group_id=30004, user_id=who))
                await link.send_event(events[-1])
            await settled(rig.storage, 3)
            frame = await link.next_action("send_group_msg")
    finally:
        await impl.close()

    (request,) = rig.chat.requests
    content = asked(request)
    assert 0 <= content.find("first") < content.find("then this") < content.find("last")
    assert "just chatting" not in content
    assert frame["params"]["message"][0] == {
        "type": "reply",
        "data": {"id": str(events[-1]["message_id"])},
    }
    turns = await rig.storage.recent_turns("qq", "group:30004", 10)
    assert sorted((t.role, t.kind) for t in turns) == sorted(
        [("user", "message")] * 3 + [("assistant", "message"), ("user", "context")]
    )


def qq_text(text: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": text}}


def test_recovery_puts_a_burst_back_in_the_order_it_was_sent() -> None:
    """Two messages handled at once can get their intake ids the other way round
    (PostgreSQL ran the second insert first); the merged turn follows the platform's
    time and message number, not the row id (seen on PostgreSQL in the kill -9 test)."""
    first, second = _entry(7, "a", 0), _entry(6, "a", 0)  # same second, ids swapped
    first = replace(first, platform_message_id="100")
    second = replace(second, platform_message_id="101")
    rows = sorted([first, second], key=lambda e: e.id)  # as recovery reads them
    assert [e.platform_message_id for e in in_arrival_order(rows)] == ["100", "101"]
