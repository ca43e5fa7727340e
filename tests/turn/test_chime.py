"""Chime-in through the real daemon: fake OneBot (QQ) + fake model, a manual clock.

What is asserted is what crossed the wire (model requests, messages sent to the group)
and what was stored. Every unaddressed message ends in one "chime-in in ..." debug line
(core/turn/chiming.py), which is what the tests wait for before moving the clock: no
sleeps, no timed assertions.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.wiring.app import Seams
from channels.onebot.channel import OneBotChannel
from core.messages import ChatType, InboundMessage
from core.turn.chime import ChimeWindows
from core.turn.chiming import SILENT, ChimeIn, ChimeSeams, chime_text
from memory.chats.types import ChatKey
from memory.turns.store import SqlStorage
from memory.turns.types import Turn
from tests.fakes.manual_clock import ManualWallClock
from tests.fakes.onebot_impl import FakeLink, FakeOneBot
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, echo_last_user
from tests.rig import daemon
from tests.turn.test_access_e2e import (
    OTHER_GROUP,
    QQ_ADMIN,
    QQ_GROUP,
    QQ_SELF,
    QQ_TOKEN,
    at_bot,
    qq_say,
    qq_settings,
    qq_text,
    until,
)

START = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
ANSWER = "Actually, the tide turns at six."


def is_chime(request: RecordedRequest) -> bool:
    body = request.json or {}
    first = (body.get("messages") or [{}])[0]
    return first.get("role") == "system" and SILENT in str(first.get("content"))


def decider(chime_answer: str) -> Callable[[dict[str, Any]], str]:
    """The fake model: `chime_answer` to chime-in decisions, an echo to everything else."""

    def reply(body: dict[str, Any]) -> str:
        first = body["messages"][0]
        if first["role"] == "system" and SILENT in first["content"]:
            return chime_answer
        return echo_last_user(body)

    return reply


@pytest.fixture
def heard(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    caplog.set_level(logging.DEBUG, logger="core.turn.chiming")
    return lambda: [r.getMessage() for r in caplog.records if r.getMessage().startswith("chime-")]


@asynccontextmanager
async def qq_group(settings: Settings, clock: ManualWallClock) -> AsyncIterator[Any]:
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with daemon(settings, Seams(clock=clock)) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token=QQ_TOKEN
            )
            await link.next_action("get_login_info")
            yield link, impl
    finally:
        await impl.close()


async def chatter(
    link: FakeLink,
    impl: FakeOneBot,
    heard: Callable[[], list[str]],
    clock: ManualWallClock,
    count: int,
    every_s: float,
    group_id: int = QQ_GROUP,
    topic: str = "the tide",
) -> None:
    """`count` unaddressed messages `every_s` apart on the manual clock, each handled
    to the end (its chime-in line logged) before the clock moves."""
    done = len(heard())
    for n in range(count):
        text = f"message {n} about {topic}"
        await link.send_event(impl.group_message(qq_text(text), group_id=group_id))
        await until(lambda n=n: len(heard()) > n + done)
        clock.advance(seconds=every_s)


async def test_off_never_speaks_unaddressed(
    tmp_path: Path, database_url: str, storage: SqlStorage, heard: Callable[[], list[str]]
) -> None:
    async with FakeOpenAI(reply=decider(ANSWER), model="chat-model") as chat:
        clock = ManualWallClock(START)
        async with qq_group(qq_settings(tmp_path, database_url, chat), clock) as (link, impl):
            await chatter(link, impl, heard, clock, count=6, every_s=300)
    assert chat.requests == [] and impl.sent == []
    assert heard() == [f"chime-in in qq:group:{QQ_GROUP}: no decision due"] * 6
    turns = await storage.recent_turns("qq", f"group:{QQ_GROUP}", 50)
    assert [t.kind for t in turns] == ["context"] * 6


async def test_low_stays_within_budget_and_never_posts_twice_in_a_row(
    tmp_path: Path, database_url: str, storage: SqlStorage, heard: Callable[[], list[str]]
) -> None:
    count, every_s, gap_s = 16, 30.0, 120.0
    async with FakeOpenAI(reply=decider(ANSWER), model="chat-model") as chat:
        clock = ManualWallClock(START)
        settings = qq_settings(
            tmp_path, database_url, chat, groups={"chime_in": "low", "burst_ms": 0}
        )
        async with qq_group(settings, clock) as (link, impl):
            await chatter(link, impl, heard, clock, count, every_s)
            await chatter(link, impl, heard, clock, 3, every_s, OTHER_GROUP, "the moon")
    decisions = [r for r in chat.requests if is_chime(r)]
    here = [r for r in decisions if "the tide" in str(r.json)]
    assert "the tide" not in str([r.json for r in decisions if r not in here])
    assert len(here) <= count * every_s / gap_s + 1
    assert len(here) >= 2  # the budget is used, not just respected
    sent = [s for s in impl.sent if s["params"].get("group_id") == QQ_GROUP]
    assert [s["params"]["message"][0]["data"]["text"] for s in sent] == [ANSWER] * len(here)
    turns = await storage.recent_turns("qq", f"group:{QQ_GROUP}", 100)
    roles = [t.role for t in turns]
    assert roles.count("assistant") == len(sent)
    assert all(a != "assistant" or b != "assistant" for a, b in zip(roles, roles[1:], strict=False))
    assert roles[0] == "user"  # never right after the bot's own message (or first)
    # The decision reads the group's stored talk and is counted for the chat in usage.
    assert "message 0 about the tide" in str(here[0].json)
    spent = await storage.usage.spent_on(START.date(), "qq", f"group:{QQ_GROUP}", "(chat)")
    assert spent.chat > 0


async def test_the_model_choosing_silence_sends_nothing_and_bot_chime_is_per_group(
    tmp_path: Path, database_url: str, storage: SqlStorage, heard: Callable[[], list[str]]
) -> None:
    async with FakeOpenAI(reply=decider(f"  {SILENT} "), model="chat-model") as chat:
        clock = ManualWallClock(START)
        settings = qq_settings(tmp_path, database_url, chat)  # [groups] chime_in: off
        admin: dict[str, Any] = {"user_id": QQ_ADMIN, "nickname": "op"}
        async with qq_group(settings, clock) as (link, impl):
            done = await qq_say(link, impl, qq_text("/bot chime normal"), **admin)
            assert done.startswith("Done. Chime-in: normal (/bot chime)")
            status = await qq_say(link, impl, qq_text("/bot status"), **admin)
            assert "Chime-in: normal (/bot chime)" in status
            answered = len(impl.sent)
            await chatter(link, impl, heard, clock, count=4, every_s=20)
            await chatter(link, impl, heard, clock, 4, 60, OTHER_GROUP, "the moon")
            assert len(impl.sent) == answered  # silence chosen: nothing sent
            await qq_say(link, impl, at_bot("still there?"))  # an addressed turn still answers
    decisions = [r for r in chat.requests if is_chime(r)]
    assert len(decisions) == 2  # t=0 and t=60 s: the gap is 45 s for normal
    assert all("the moon" not in str(r.json) for r in decisions)  # that group is off
    assert sum(1 for line in heard() if line.endswith(": silent")) == 2
    turns = await storage.recent_turns("qq", f"group:{QQ_GROUP}", 100)
    assert SILENT not in " ".join(t.content for t in turns)


# -- the rules without a daemon ---------------------------------------------------------------


def test_windows_bound_and_the_silent_window_after_speaking() -> None:
    now = [0.0]
    windows = ChimeWindows(lambda: now[0])
    chat = ChatKey("qq", "group:1")
    opened = []
    for n in range(200):
        now[0] = n * 2.0
        batch = windows.heard(chat, "low")
        if batch:
            opened.append((n, batch))
            if len(opened) == 1:
                windows.spoke(chat)
    assert windows.decisions <= 200 * 2 / 120 + 1
    # t=0 spoke, so the window at t=120 passes without a decision; t=240 and t=360 decide
    assert opened == [(0, 1), (120, 60), (180, 60)]
    assert windows.heard(ChatKey("qq", "group:2"), "off") == 0


def test_chime_text_contract() -> None:
    assert chime_text("[silent]", 400) == ""
    assert chime_text("  [SILENT]\n", 400) == ""
    assert chime_text("", 400) == ""
    assert chime_text("Sure [silent]", 400) == ""
    assert chime_text("Hi all", 400) == "Hi all"
    assert len(chime_text("x" * 1000, 400)) == 400


class _Store:
    def __init__(self, last_role: str) -> None:
        self.last_role = last_role
        self.added: list[Any] = []

    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]:
        turn = Turn(
            1, platform, chat_id, self.last_role, "message", "hi", 1, None, None, None, {}, START
        )  # type: ignore[arg-type]
        return [turn]

    async def add_turn(self, turn: Any) -> None:
        self.added.append(turn)


class _NeverCalled:
    model = "m"
    endpoint = "x"

    async def chat(self, messages: Any, **options: Any) -> Any:
        raise AssertionError("no decision call right after the bot's own message")


async def test_no_decision_right_after_the_bots_own_message() -> None:
    from core.text.tokens import get_counter

    store = _Store("assistant")
    chime = ChimeIn(
        windows=ChimeWindows(lambda: 0.0),
        seams=ChimeSeams(
            store,
            _NeverCalled(),  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            get_counter("estimate"),
        ),
    )
    message = InboundMessage(
        platform="qq",
        chat_id="group:1",
        chat_type=ChatType.GROUP,
        sender_id="2",
        sender_name="Ann",
        text="hm",
    )
    assert await chime.heard(message, "low") is False
    assert store.added == []


async def test_no_decision_past_the_limits_allowance() -> None:
    from core.text.tokens import get_counter

    class SpentGroup:
        async def over_quota(self, message: InboundMessage) -> bool:
            return True

        async def persona(self, message: InboundMessage) -> str:
            return ""

    store = _Store("user")
    chime = ChimeIn(
        windows=ChimeWindows(lambda: 0.0),
        seams=ChimeSeams(
            store,
            _NeverCalled(),  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            get_counter("estimate"),
        ),
        rules=SpentGroup(),
    )
    message = InboundMessage("qq", "group:1", ChatType.GROUP, "2", "Ann", "hm")
    assert await chime.heard(message, "normal") is False
    assert store.added == []
