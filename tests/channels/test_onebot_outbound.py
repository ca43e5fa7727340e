"""QQ replies going out: plain text, one merged-forward message when long, paced sends.

What people rely on: a QQ user never sees `**`, `#`, fences or `[text](url)`; a long
answer is one "chat history" card holding the whole text, or (where the implementation
has no forward messages) the same text in pieces; an account never sends faster than
`send_interval_s`, however many chats it answers, and one account never waits for
another; a reply that could not be sent is reported to the core as DeliveryError.
All against the fake OneBot implementation over a real WebSocket, on an injected clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest

from channels.config import OnebotConfig
from channels.formatting.plain import render_plain
from channels.onebot.actions import ActionFailed
from channels.onebot.channel import OneBotChannel, OneBotTimings
from core.messages import DeliveryError, OutboundMessage, Reply
from tests.fakes.door import start_answering
from tests.fakes.manual_clock import ManualClock
from tests.fakes.onebot_impl import (
    ActionRefused,
    FakeLink,
    FakeOneBot,
    Recorder,
    eventually,
    sent_text,
)

SELF = 10001
INTERVAL = 1.0
MARKDOWN = (
    "## Setup\n\n"
    "**注意：**先安装。Run `pip install **x**` then:\n\n"
    "```python\nprint('*not* bold')\n```\n\n"
    "- see [the docs](https://example.com/a?b=1)\n"
    "- or *ask* me"
)
PLAIN = (
    "Setup\n\n"
    "注意：先安装。Run pip install **x** then:\n\n"
    "print('*not* bold')\n\n"
    "• see the docs (https://example.com/a?b=1)\n"
    "• or ask me"
)


@dataclass
class Rig:
    channel: OneBotChannel
    clock: ManualClock
    handler: Recorder
    impls: list[FakeOneBot]

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.channel.listen_port}/onebot/v11/ws"

    async def connect(
        self, self_id: int = SELF, forward: str = "ok"
    ) -> tuple[FakeOneBot, FakeLink]:
        impl = FakeOneBot(self_id=self_id, forward=forward, clock=self.clock.monotonic)
        self.impls.append(impl)
        link = await impl.connect_reverse(self.url)
        await link.next_action("get_login_info")
        # The login answer (the bot's nickname) is read before this event on the socket.
        await link.send_event(impl.private_message("/ping", user_id=1))
        await self.handler.next()
        return impl, link


async def make_rig(*, auto: bool = True, **config: Any) -> Rig:
    settings = OnebotConfig(enabled=True, host="127.0.0.1", send_interval_s=INTERVAL, **config)
    clock = ManualClock(auto=auto)
    channel = OneBotChannel(
        settings.model_copy(update={"port": 0}),
        image_max_bytes=1024,
        timings=OneBotTimings(action_timeout_s=2.0, send_wait_s=0.5),
        clock=clock,
    )
    handler = Recorder()
    await start_answering(channel, handler)
    return Rig(channel, clock, handler, [])


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = await make_rig()
    yield r
    await r.channel.stop()
    for impl in r.impls:
        await impl.close()


@pytest.fixture
async def manual() -> AsyncIterator[Rig]:
    r = await make_rig(auto=False)
    yield r
    await r.channel.stop()
    for impl in r.impls:
        await impl.close()


def answer(chat_id: str, text: str, reply_to: str | None = None) -> OutboundMessage:
    return OutboundMessage("qq", chat_id, text, reply_to_message_id=reply_to)


def long_markdown(paragraphs: int = 8) -> str:
    """~6,000 characters of the model's Markdown, CJK and emoji included."""
    body = "**要点：**这一段说明细节 👍🏽 and some English words to make it longer. " * 10
    return "\n\n".join(f"## Part {n}\n\n{body}" for n in range(1, paragraphs + 1))


def gaps(times: list[float]) -> list[float]:
    return [round(b - a, 6) for a, b in zip(times, times[1:], strict=False)]


# -- plain text ----------------------------------------------------------------------


async def test_model_markdown_arrives_as_readable_plain_text(rig: Rig) -> None:
    impl, _ = await rig.connect()
    sent = await rig.channel.send(answer("group:30003", MARKDOWN, reply_to="777"))
    [entry] = impl.sent
    assert entry["action"] == "send_group_msg"
    assert entry["params"]["message"] == [
        {"type": "reply", "data": {"id": "777"}},
        {"type": "text", "data": {"text": PLAIN}},
    ]
    assert sent.message_ids == (str(entry["message_id"]),)


async def test_command_replies_are_sent_as_written(rig: Rig) -> None:
    """Our own texts are plain already: a /context report's indentation, a remembered
    fact's `*` stay as they are."""
    impl, link = await rig.connect()
    report = "System prompt:\n  identity: included, 120 tokens\n1. I like *stars* and a_b_c"
    rig.handler.reply = lambda m: Reply(report)
    await link.send_event(impl.private_message("/context"))
    [entry] = await impl.wait_sent(1)
    assert entry["params"]["message"] == [{"type": "text", "data": {"text": report}}]


# -- merged-forward messages ---------------------------------------------------------


@pytest.mark.parametrize(
    ("chat_id", "action", "target"),
    [
        ("group:30003", "send_group_forward_msg", {"group_id": 30003}),
        ("private:20002", "send_private_forward_msg", {"user_id": 20002}),
    ],
)
async def test_long_answer_is_one_forward_message_with_the_whole_text(
    rig: Rig, chat_id: str, action: str, target: dict[str, int]
) -> None:
    impl, _ = await rig.connect()
    markdown = long_markdown()
    plain = render_plain(markdown)
    assert len(plain) > 4500  # more than one QQ message could hold
    sent = await rig.channel.send(answer(chat_id, markdown, reply_to="777"))
    [entry] = impl.sent
    assert entry["action"] == action
    assert {k: v for k, v in entry["params"].items() if k != "messages"} == target
    nodes = entry["params"]["messages"]
    assert len(nodes) == 2
    for node in nodes:
        data = node["data"]
        assert node["type"] == "node"
        # the bot as the sender, in both spellings implementations read
        assert (data["name"], data["uin"]) == ("chatterbot", str(SELF))
        assert (data["nickname"], data["user_id"]) == ("chatterbot", SELF)
        assert [seg["type"] for seg in data["content"]] == ["text"]
        assert len(data["content"][0]["data"]["text"]) <= 4500
    assert sent_text(entry).replace("\n\n", "") == plain.replace("\n\n", "")
    assert "**" not in sent_text(entry) and "##" not in sent_text(entry)
    assert sent.message_ids == (str(entry["message_id"]),)


async def test_forward_threshold_is_the_rendered_length_and_configurable() -> None:
    r = await make_rig(forward_over_chars=20)
    try:
        impl, _ = await r.connect()
        await r.channel.send(answer("group:1", "**" + "x" * 20 + "**"))  # 20 shown: normal
        await r.channel.send(answer("group:1", "x" * 21))
        assert [e["action"] for e in impl.sent] == ["send_group_msg", "send_group_forward_msg"]
    finally:
        await r.channel.stop()
        await r.impls[0].close()
    off = await make_rig(forward_over_chars=0)  # 0: never a forward message
    try:
        impl, _ = await off.connect()
        await off.channel.send(answer("group:1", long_markdown()))
        assert {e["action"] for e in impl.sent} == {"send_group_msg"}
    finally:
        await off.channel.stop()
        await off.impls[0].close()


@pytest.mark.parametrize("mode", ["missing", "named"])
async def test_without_forward_support_the_answer_goes_in_paced_pieces(rig: Rig, mode: str) -> None:
    impl, link = await rig.connect(forward=mode)
    markdown = long_markdown()
    sent = await rig.channel.send(answer("group:30003", markdown, reply_to="777"))
    [refusal] = impl.refused
    assert refusal["action"] == "send_group_forward_msg"
    assert [e["action"] for e in impl.sent] == ["send_group_msg", "send_group_msg"]
    assert "\n\n".join(impl.texts()) == render_plain(markdown)
    assert impl.sent[0]["params"]["message"][0] == {"type": "reply", "data": {"id": "777"}}
    # the refused forward was a send too: the pieces keep their distance from it
    times = [refusal["at"], *(e["at"] for e in impl.sent)]
    assert gaps(times) == [INTERVAL, INTERVAL]
    assert sent.message_ids == tuple(str(e["message_id"]) for e in impl.sent)

    # remembered for this connection: the next long answer does not ask again
    await rig.channel.send(answer("group:30003", markdown))
    assert len(impl.refused) == 1 and len(impl.sent) == 4
    # a new connection may be an upgraded implementation: asked once more
    impl.set_forward("ok")
    await link.close()
    await eventually(lambda: str(SELF) not in rig.channel.accounts)
    relink = await impl.connect_reverse(rig.url)
    await relink.next_action("get_login_info")
    await eventually(lambda: str(SELF) in rig.channel.accounts)
    await rig.channel.send(answer("group:30003", markdown))
    assert impl.sent[-1]["action"] == "send_group_forward_msg"


async def test_a_forward_that_fails_this_time_falls_back_and_is_tried_again(rig: Rig) -> None:
    impl, _ = await rig.connect(forward="broken")
    await rig.channel.send(answer("private:20002", long_markdown()))
    await rig.channel.send(answer("private:20002", long_markdown()))
    assert [r["action"] for r in impl.refused] == ["send_private_forward_msg"] * 2
    assert {e["action"] for e in impl.sent} == {"send_private_msg"}


# -- pacing --------------------------------------------------------------------------


async def test_sends_of_one_account_across_chats_are_spaced(manual: Rig) -> None:
    impl, _ = await manual.connect()
    chats = ["group:1", "group:2", "private:3", "group:4"]
    sends = [asyncio.create_task(manual.channel.send(answer(c, f"hi {c}"))) for c in chats]
    start = manual.clock.now
    for step in range(1, len(chats) + 1):
        await impl.wait_sent(step)  # one send, then nothing until the clock moves on
        manual.clock.advance(INTERVAL)
    await asyncio.gather(*sends)
    assert sorted(impl.texts()) == sorted(f"hi {c}" for c in chats)
    assert [e["at"] for e in impl.sent] == [start + n * INTERVAL for n in range(4)]
    # a send after a quiet spell goes at once
    manual.clock.advance(10)
    await manual.channel.send(answer("group:1", "later"))
    assert impl.sent[-1]["at"] == manual.clock.now


async def test_accounts_are_paced_independently(manual: Rig) -> None:
    clock = manual.clock
    a, a_link = await manual.connect(self_id=10001)
    b, b_link = await manual.connect(self_id=10002)
    # each account has seen its own chats, so it answers them
    for impl, link, chats in ((a, a_link, (1, 2, 3)), (b, b_link, (4, 5, 6))):
        for group in chats:
            await link.send_event(impl.group_message("hello", group_id=group))
    for _ in range(6):
        await manual.handler.next()
    sends = [
        asyncio.create_task(manual.channel.send(answer(f"group:{g}", f"to {g}")))
        for g in range(1, 7)
    ]
    start = clock.now
    for step in (1, 2, 3):
        await a.wait_sent(step)
        await b.wait_sent(step)
        clock.advance(INTERVAL)
    await asyncio.gather(*sends)
    expected = [start, start + INTERVAL, start + 2 * INTERVAL]
    assert [e["at"] for e in a.sent] == expected
    assert [e["at"] for e in b.sent] == expected  # B never waited for A
    assert {e["params"]["group_id"] for e in a.sent} == {1, 2, 3}
    assert {e["params"]["group_id"] for e in b.sent} == {4, 5, 6}


# -- failures and stop ---------------------------------------------------------------


async def test_a_send_that_failed_after_waiting_in_line_raises_delivery_error(
    manual: Rig,
) -> None:
    impl, _ = await manual.connect()
    await manual.channel.send(answer("group:1", "first"))

    def refuse(params: dict[str, Any]) -> None:
        raise ActionRefused(120, "group sending is switched off")

    impl.responders["send_group_msg"] = refuse
    waiting = asyncio.create_task(manual.channel.send(answer("group:2", "second")))
    await eventually(lambda: manual.clock.sleeping == 1)  # in line, waiting its turn
    assert not waiting.done() and not impl.refused
    manual.clock.advance(INTERVAL)
    with pytest.raises(DeliveryError) as info:
        await waiting
    assert isinstance(info.value.__cause__, ActionFailed)
    assert info.value.__cause__.retcode == 120
    assert [r["at"] for r in impl.refused] == [impl.sent[0]["at"] + INTERVAL]


async def test_a_caller_that_gives_up_takes_its_send_out_of_line(manual: Rig) -> None:
    impl, _ = await manual.connect()
    await manual.channel.send(answer("group:1", "first"))
    dropped = asyncio.create_task(manual.channel.send(answer("group:2", "dropped")))
    kept = asyncio.create_task(manual.channel.send(answer("group:3", "kept")))
    await eventually(lambda: manual.clock.sleeping == 1)
    dropped.cancel()
    manual.clock.advance(INTERVAL)
    await kept
    assert impl.texts() == ["first", "kept"]


async def test_stop_fails_queued_sends_and_leaves_nothing_behind(manual: Rig) -> None:
    impl, _ = await manual.connect()
    await manual.channel.send(answer("group:1", "first"))
    queued = [
        asyncio.create_task(manual.channel.send(answer(f"group:{n}", f"queued {n}")))
        for n in (2, 3)
    ]
    await eventually(lambda: manual.clock.sleeping == 1)
    await asyncio.wait_for(manual.channel.stop(), 2)
    for task in queued:
        with pytest.raises(DeliveryError, match="stop"):
            await task
    assert impl.texts() == ["first"]
    assert manual.clock.sleeping == 0  # the queue's wait was cancelled, not left hanging
    with pytest.raises(DeliveryError):
        await manual.channel.send(answer("group:1", "after stop"))


# -- files ---------------------------------------------------------------------------


async def test_a_file_goes_to_a_private_chat_as_one_upload_and_a_refusal_is_delivery_error(
    rig: Rig,
) -> None:
    impl, _ = await rig.connect()
    data = "naïve,€\n1,2\n".encode()
    file = OutboundMessage("qq", "private:20002", "t.csv", document=data, document_name="t.csv")
    sent = await rig.channel.send(file)
    assert sent.message_ids == ()
    assert impl.uploads == [
        {"action": "upload_private_file", "to": 20002, "name": "t.csv", "data": data}
    ]
    assert impl.sent == []  # the file alone: no text message beside it

    def refuse(params: dict[str, Any]) -> None:
        raise ActionRefused(1200, "file not found")

    impl.responders["upload_group_file"] = refuse
    with pytest.raises(DeliveryError):
        await rig.channel.send(replace(file, chat_id="group:30003"))
    assert len(impl.uploads) == 1
