"""What shows before the answer: "typing…" until the reply's text appears, and the
optional ack reaction on a group message whose answer is slow to show."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from core.messages import InboundMessage, OutboundMessage
from tests.channels.test_telegram import BOT, FAST
from tests.channels.test_telegram_stream import GROUP, Records, channel_on
from tests.fakes.manual_clock import ManualClock
from tests.fakes.telegram_server import FakeTelegram, Inbox, entity, private_chat, user

ALICE = user(1001, "Alice")
QUICK_TYPING = replace(FAST, typing_interval_s=0.05)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(auto=True)


def mention(tg: FakeTelegram, text: str) -> dict:
    body = f"@{BOT} {text}"
    return tg.push_message(GROUP, ALICE, body, entities=[entity("mention", body, f"@{BOT}")])


async def test_typing_shows_until_the_first_text_then_stops(tg, clock) -> None:
    counts: dict[str, int] = {}

    async def answer(message: InboundMessage) -> None:
        await tg.wait_for("sendChatAction", count=2)  # "typing…" while nothing shows
        stream = channel.open_stream(OutboundMessage("telegram", message.chat_id, ""), Records())
        assert stream is not None
        await stream.show("Hello there.")
        await tg.wait_for("sendMessageDraft")
        counts["at_text"] = len(tg.calls_of("sendChatAction"))
        await asyncio.sleep(0.3)  # six typing intervals
        counts["later"] = len(tg.calls_of("sendChatAction"))
        await stream.finish("Hello there.")

    async with channel_on(tg, clock, inbox=Inbox(answer), timings=QUICK_TYPING) as channel:
        tg.push_message(private_chat(ALICE), ALICE, "hi")
        await tg.wait_for("sendMessage")
    assert counts["later"] - counts["at_text"] <= 1  # at most one already on its way


async def test_a_slow_group_answer_gets_the_ack_reaction_until_it_is_sent(tg, clock) -> None:
    async def answer(message: InboundMessage) -> None:
        await tg.wait_for("setMessageReaction")  # nothing shows yet: acknowledged
        await channel.send(
            OutboundMessage(
                "telegram", message.chat_id, "Done.", reply_to_message_id=message.message_id
            )
        )

    async with channel_on(tg, clock, inbox=Inbox(answer), ack_reaction="👀") as channel:
        asked = mention(tg, "a hard question")
        await tg.wait_for("setMessageReaction", count=2)
    put, taken = tg.reactions
    assert (put["chat_id"], put["message_id"]) == (GROUP["id"], asked["message_id"])
    assert put["reaction"] == [{"type": "emoji", "emoji": "👀"}]
    assert (taken["message_id"], taken["reaction"]) == (asked["message_id"], [])
    order = [c.method for c in tg.calls if c.method in ("setMessageReaction", "sendMessage")]
    assert order == ["setMessageReaction", "sendMessage", "setMessageReaction"]


async def test_no_ack_reaction_once_the_answer_is_showing(tg) -> None:
    gate = ManualClock(auto=True, gated=True)

    async def answer(message: InboundMessage) -> None:
        stream = channel.open_stream(
            OutboundMessage("telegram", message.chat_id, "", reply_to_message_id="1"), Records()
        )
        assert stream is not None
        await stream.show("Sure, here it comes. First")
        await tg.wait_for("sendMessage")  # the answer is showing in the group
        gate.gate.set()  # now the ack delay is over
        await asyncio.sleep(0.2)  # room for a wrong reaction to arrive
        await stream.finish("Sure, here it comes. First, tea.")

    async with channel_on(tg, gate, inbox=Inbox(answer), ack_reaction="👀") as channel:
        mention(tg, "a question")
        await tg.wait_for("editMessageText")
    assert tg.reactions == []


async def test_no_ack_reaction_when_it_is_off(tg, clock) -> None:
    async def answer(message: InboundMessage) -> None:
        await channel.send(OutboundMessage("telegram", message.chat_id, "Done."))

    async with channel_on(tg, clock, inbox=Inbox(answer)) as channel:
        mention(tg, "no reaction configured")
        await tg.wait_for("sendMessage")
    assert tg.reactions == []


async def test_no_ack_reaction_in_private_chats(tg, clock) -> None:
    async def answer(message: InboundMessage) -> None:
        await channel.send(OutboundMessage("telegram", message.chat_id, "Done."))

    async with channel_on(tg, clock, inbox=Inbox(answer), ack_reaction="👀") as channel:
        tg.push_message(private_chat(ALICE), ALICE, "a DM")
        await tg.wait_for("sendMessage")
    assert tg.reactions == []
