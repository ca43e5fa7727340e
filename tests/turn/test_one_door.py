"""One door out: every message the daemon sends leaves through core/turn/delivery.py.

Through the real daemon (bot.wiring.app.App) on the fakes: a command's answer goes out by the
same channel code as a model reply (so a Bot API hiccup is retried, not lost or doubled),
a message nobody asked for reaches a Telegram chat, and an HTTP chat, which can only be
answered while its request waits, refuses one with a clear error.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from channels.config import HttpConfig
from channels.http.channel import HttpChannel
from core.messages import DeliveryError, InboundMessage, OutboundMessage
from core.turn.accepted import notice_for
from core.turn.delivery import ChannelRoutes, Outbox
from memory.turns.types import Intake
from tests.channels.test_channel_e2e import ALICE, daemon, telegram_section
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, private_chat
from tests.rig import settings_for


async def test_a_command_answer_whose_first_send_fails_502_is_delivered_exactly_once(
    tmp_path: Path, database_url: str, tg: FakeTelegram
) -> None:
    async with FakeOpenAI(reply="unused") as chat:
        settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
        tg.fail("sendMessage", 502)
        async with daemon(settings):
            tg.push_message(private_chat(ALICE), ALICE, "/memory")
            await tg.wait_for("sendMessage", 2)  # the 502, then the retry
        # the daemon's stop drains every send: nothing more can arrive after this
        assert [p["text"] for p in tg.sent] == ["I don't remember anything about you yet."]
        assert len(tg.calls_of("sendMessage")) == 2
        assert chat.requests == []  # a command never reaches the model


async def test_a_proactive_message_reaches_telegram_and_an_http_chat_refuses_one(
    tmp_path: Path, database_url: str, tg: FakeTelegram
) -> None:
    http = {"enabled": True, "host": "127.0.0.1", "port": 0}
    async with FakeOpenAI(reply="unused") as chat:
        settings = settings_for(
            tmp_path, database_url, chat, telegram=telegram_section(tg), http=http
        )
        async with daemon(settings) as app:
            outbox = app.outbox
            assert outbox is not None
            reminder = OutboundMessage("telegram", str(ALICE["id"]), "Tea time!")
            sent = await outbox.send_proactive(reminder)
            assert len(sent.message_ids) == 1
            with pytest.raises(DeliveryError, match="no push target"):
                await outbox.send_proactive(OutboundMessage("http", "u1", "Tea time!"))
    assert [(p["chat_id"], p["text"]) for p in tg.sent] == [(ALICE["id"], "Tea time!")]


async def test_http_pairs_each_waiting_request_with_its_own_reply() -> None:
    """Two requests of one chat wait at once; their answers are sent in the opposite
    order, and each request still gets its own: the pairing is per request, not chat."""
    channel = HttpChannel(HttpConfig(host="127.0.0.1", port=0), dict)
    routes = ChannelRoutes()
    routes.add(channel)
    outbox = Outbox(routes, _no_intake())
    first_arrived = asyncio.Event()
    second_answered = asyncio.Event()

    async def handler(message: InboundMessage) -> None:
        if message.text == "first":
            first_arrived.set()
            await second_answered.wait()
        else:
            await first_arrived.wait()
        await outbox.tell(notice_for(message, f"re: {message.text}"))
        if message.text == "second":
            second_answered.set()

    await channel.start(handler)
    try:
        url = f"http://127.0.0.1:{channel.port}/v1/chat"
        async with aiohttp.ClientSession() as session:

            async def say(text: str) -> object:
                body = {"user_id": "u1", "chat_type": "private", "text": text}
                async with session.post(url, json=body) as response:
                    return (await response.json())["reply"]

            answers = await asyncio.gather(say("first"), say("second"))
        assert answers == ["re: first", "re: second"]
        # nobody waits any more: a late answer is refused, to be read by a retry
        with pytest.raises(DeliveryError, match="no HTTP request is waiting"):
            await channel.send(OutboundMessage("http", "u1", "late"))
    finally:
        await channel.stop()


def _no_intake() -> Intake:
    """`tell` and `send_proactive` never touch the intake (no turn waits on them)."""
    return None  # type: ignore[return-value]
