"""QQ channel, reverse WebSocket: events in, replies out, against a fake OneBot client."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from channels.config import OnebotConfig
from channels.onebot.channel import OneBotChannel, OneBotTimings
from channels.onebot.outbound import DM_REFUSED
from core.media.fetch import DownloadError, DownloadRefused
from core.messages import ChatType, Reply
from tests.fakes.door import start_answering
from tests.fakes.manual_clock import ManualClock
from tests.fakes.onebot_impl import (
    PNG,
    ActionRefused,
    FakeLink,
    FakeOneBot,
    MediaServer,
    Recorder,
    cq_code,
    cq_text,
    eventually,
)

SELF = 10001


@dataclass
class Rig:
    channel: OneBotChannel
    impl: FakeOneBot
    link: FakeLink
    handler: Recorder
    clock: ManualClock


async def start_rig(allow: list[str] | None = None, *, forward: str = "ok") -> Rig:
    config = OnebotConfig(
        enabled=True,
        host="127.0.0.1",
        path="/onebot/v11/ws",
        allow_private_media_hosts=allow or [],
    ).model_copy(update={"port": 0})  # the OS picks a free port
    clock = ManualClock(auto=True)  # sends are paced on this clock: no real waiting
    channel = OneBotChannel(
        config, image_max_bytes=1 << 20, timings=OneBotTimings(action_timeout_s=2.0), clock=clock
    )
    handler = Recorder()
    await start_answering(channel, handler)
    impl = FakeOneBot(self_id=SELF, forward=forward, clock=clock.monotonic)
    link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
    await link.next_action("get_login_info")
    return Rig(channel, impl, link, handler, clock)


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = await start_rig()
    yield r
    await r.channel.stop()
    await r.impl.close()


async def test_group_message_array_form_with_card(rig: Rig) -> None:
    event = rig.impl.group_message(
        [{"type": "text", "data": {"text": "hello there"}}], card="Alice (ops)", nickname="al"
    )
    await rig.link.send_event(event)
    msg = await rig.handler.next()
    assert msg.platform == "qq"
    assert msg.chat_type is ChatType.GROUP
    assert msg.chat_id == "group:30003"
    assert msg.sender_id == "20002"
    assert msg.sender_name == "Alice (ops)"
    assert msg.text == "hello there"
    assert msg.message_id == str(event["message_id"])
    assert not msg.mentions_bot and not msg.reply_to_bot


async def test_names_fall_back_nickname_then_number_and_are_cleaned(rig: Rig) -> None:
    await rig.link.send_event(rig.impl.group_message("a", card="", nickname="bo\u202eb\nx"))
    assert (await rig.handler.next()).sender_name == "bob x"
    await rig.link.send_event(rig.impl.group_message("b", card="\u202e", nickname=""))
    assert (await rig.handler.next()).sender_name == "20002"
    # in a private chat the group card does not apply
    event = rig.impl.private_message("c", nickname="carol")
    event["sender"]["card"] = "ignored"
    await rig.link.send_event(event)
    msg = await rig.handler.next()
    assert msg.sender_name == "carol"
    assert msg.chat_type is ChatType.PRIVATE and msg.chat_id == "private:20002"


async def test_cq_string_form_with_mention_of_bot(rig: Rig) -> None:
    raw = cq_code("at", qq=SELF) + " " + cq_text("what is [1,2] & more?")
    await rig.link.send_event(rig.impl.group_message(raw))
    msg = await rig.handler.next()
    assert msg.mentions_bot
    assert msg.text == "what is [1,2] & more?"


async def test_at_all_is_not_a_mention(rig: Rig) -> None:
    await rig.link.send_event(rig.impl.group_message(cq_code("at", qq="all") + " lunch?"))
    msg = await rig.handler.next()
    assert not msg.mentions_bot
    assert msg.text == "@all lunch?"


async def test_group_reply_is_segments_with_reply_to_trigger(rig: Rig) -> None:
    rig.handler.reply = lambda m: Reply(f"echo: {m.text}")
    event = rig.impl.group_message([{"type": "text", "data": {"text": "ping"}}])
    await rig.link.send_event(event)
    [sent] = await rig.impl.wait_sent(1)
    assert sent["action"] == "send_group_msg"
    assert sent["params"] == {
        "group_id": 30003,
        "message": [
            {"type": "reply", "data": {"id": str(event["message_id"])}},
            {"type": "text", "data": {"text": "echo: ping"}},
        ],
    }


async def test_private_reply_has_no_reply_segment(rig: Rig) -> None:
    rig.handler.reply = lambda m: Reply("hi")
    await rig.link.send_event(rig.impl.private_message("hello"))
    [sent] = await rig.impl.wait_sent(1)
    assert sent["action"] == "send_private_msg"
    assert sent["params"] == {
        "user_id": 20002,
        "message": [{"type": "text", "data": {"text": "hi"}}],
    }


async def test_long_reply_without_forward_is_split_and_only_first_part_replies() -> None:
    r = await start_rig(forward="missing")
    try:
        paragraph = ("word " * 199 + "end.").strip()  # ~1000 chars
        r.handler.reply = lambda m: Reply("\n\n".join([paragraph] * 10))
        await r.link.send_event(r.impl.group_message("long please"))
        await eventually(lambda: len(r.impl.sent) >= 3)
        parts = [s["params"]["message"] for s in r.impl.sent]
        assert parts[0][0]["type"] == "reply"
        assert all(p[0]["type"] == "text" for p in parts[1:])
        texts = [p[-1]["data"]["text"] for p in parts]
        assert all(len(t) <= 4500 for t in texts)
        assert "\n\n".join(texts) == "\n\n".join([paragraph] * 10)
    finally:
        await r.channel.stop()
        await r.impl.close()


async def test_private_reply_from_group_goes_to_dm(rig: Rig) -> None:
    rig.handler.reply = lambda m: Reply("your memory: ...", private=True)
    await rig.link.send_event(rig.impl.group_message("/memory show"))
    [sent] = await rig.impl.wait_sent(1)
    assert sent["action"] == "send_private_msg"
    assert sent["params"]["user_id"] == 20002
    assert sent["params"]["message"] == [{"type": "text", "data": {"text": "your memory: ..."}}]


async def test_refused_dm_is_explained_in_the_group(rig: Rig) -> None:
    def refuse(params: dict[str, object]) -> None:
        raise ActionRefused(1200, "not friends")

    rig.impl.responders["send_private_msg"] = refuse
    rig.handler.reply = lambda m: Reply("secret", private=True)
    event = rig.impl.group_message("/memory show")
    await rig.link.send_event(event)
    [sent] = await rig.impl.wait_sent(1)
    assert sent["action"] == "send_group_msg"
    assert sent["params"]["message"] == [
        {"type": "reply", "data": {"id": str(event["message_id"])}},
        {"type": "text", "data": {"text": DM_REFUSED}},
    ]


async def test_reply_to_the_bot_is_recognised(rig: Rig) -> None:
    rig.handler.reply = lambda m: Reply("first answer") if m.text == "q" else None
    await rig.link.send_event(rig.impl.group_message("q"))
    await rig.handler.next()
    [sent] = await rig.impl.wait_sent(1)
    bot_message_id = sent["message_id"]
    follow_up = [
        {"type": "reply", "data": {"id": str(bot_message_id)}},
        {"type": "at", "data": {"qq": str(SELF)}},  # QQ clients add an @ of the author
        {"type": "text", "data": {"text": " and then?"}},
    ]
    await rig.link.send_event(rig.impl.group_message(follow_up))
    msg = await rig.handler.next()
    assert msg.reply_to_bot and msg.mentions_bot
    assert msg.reply_to_sender_id == str(SELF)
    assert msg.text == "and then?"


async def test_reply_to_someone_else(rig: Rig) -> None:
    first = rig.impl.group_message("original", user_id=33333)
    await rig.link.send_event(first)
    await rig.handler.next()
    reply = [
        {"type": "reply", "data": {"id": str(first["message_id"])}},
        {"type": "text", "data": {"text": "agreed"}},
    ]
    await rig.link.send_event(rig.impl.group_message(reply))
    msg = await rig.handler.next()
    assert not msg.reply_to_bot
    assert msg.reply_to_sender_id == "33333"


async def test_reply_to_unseen_message_is_looked_up_with_get_msg(rig: Rig) -> None:
    rig.impl.known[777] = {"message_id": 777, "sender": {"user_id": SELF}}  # before restart
    reply = [{"type": "reply", "data": {"id": "777"}}, {"type": "text", "data": {"text": "hm"}}]
    await rig.link.send_event(rig.impl.group_message(reply))
    lookup = await rig.link.next_action("get_msg")
    assert lookup["params"] == {"message_id": 777}
    msg = await rig.handler.next()
    assert msg.reply_to_bot and msg.reply_to_sender_id == str(SELF)


async def test_command_reply_without_a_cached_body_reads_files_from_get_msg(rig: Rig) -> None:
    """The author is cached but neither text nor files are (evicted, or a picture, which
    has no text): a plain reply needs no lookup, a command asks `get_msg` once and gets
    the quoted message's file as a reply attachment."""
    picture = {"type": "image", "data": {"file": "p.png", "url": "http://127.0.0.1:9/p.png"}}
    seen = rig.impl.group_message([picture], user_id=33333)
    await rig.link.send_event(seen)
    await rig.handler.next()
    file = {"type": "file", "data": {"file": "a.pdf", "file_id": "f-1", "file_size": 2048}}
    rig.impl.known[seen["message_id"]]["message"] = [file]
    quote = {"type": "reply", "data": {"id": str(seen["message_id"])}}

    await rig.link.send_event(rig.impl.group_message([quote, text_seg("nice")]))
    plain = await rig.handler.next()
    assert plain.reply_to_sender_id == "33333" and plain.reply_attachments == ()
    await rig.link.send_event(rig.impl.group_message([quote, text_seg("/kb add")]))
    command = await rig.handler.next()
    assert command.reply_to_sender_id == "33333"
    (doc,) = command.reply_attachments
    assert (doc.kind, doc.name, doc.size) == ("document", "a.pdf", 2048)
    lookups = [f for f in drain(rig.link) if f.get("action") == "get_msg"]
    assert [f["params"] for f in lookups] == [{"message_id": seen["message_id"]}]


async def test_a_failed_get_msg_keeps_the_cached_author_of_a_command_reply(rig: Rig) -> None:
    """A command reply to a picture (author cached, no text or files) asks `get_msg`; when
    that fails, the reply still names the author the bot saw."""
    picture = {"type": "image", "data": {"file": "p.png", "url": "http://127.0.0.1:9/p.png"}}
    seen = rig.impl.group_message([picture], user_id=33333)
    await rig.link.send_event(seen)
    await rig.handler.next()
    del rig.impl.known[seen["message_id"]]  # the implementation no longer has it: refused
    quote = {"type": "reply", "data": {"id": str(seen["message_id"])}}
    await rig.link.send_event(rig.impl.group_message([quote, text_seg("/kb add")]))
    command = await rig.handler.next()
    assert command.reply_to_sender_id == "33333" and command.reply_attachments == ()
    lookups = [f for f in drain(rig.link) if f.get("action") == "get_msg"]
    assert len(lookups) == 1


def text_seg(value: str) -> dict[str, object]:
    return {"type": "text", "data": {"text": value}}


def drain(link: FakeLink) -> list[dict[str, object]]:
    """Every action frame chatterd has sent so far and no test has taken yet."""
    frames = []
    while not link.actions.empty():
        frames.append(link.actions.get_nowait())
    return frames


async def test_cq_injection_in_user_text_stays_text(rig: Rig) -> None:
    rig.handler.reply = lambda m: Reply(f"you said {m.text}")
    attack = "[CQ:at,qq=all] [CQ:image,file=http://169.254.169.254/]"
    # the user typed it, so on the wire it is escaped text, not codes
    await rig.link.send_event(rig.impl.group_message(cq_text(attack)))
    msg = await rig.handler.next()
    assert msg.text == attack and not msg.images
    [sent] = await rig.impl.wait_sent(1)
    message = sent["params"]["message"]
    assert isinstance(message, list)
    assert [seg["type"] for seg in message] == ["reply", "text"]
    assert message[1]["data"]["text"] == f"you said {attack}"


async def test_own_messages_are_ignored(rig: Rig) -> None:
    await rig.link.send_event(rig.impl.group_message("my own echo", user_id=SELF))
    sent_event = rig.impl.group_message("also mine", user_id=SELF)
    sent_event["post_type"] = "message_sent"
    await rig.link.send_event(sent_event)
    await rig.link.send_event(rig.impl.group_message("from a human"))
    assert (await rig.handler.next()).text == "from a human"
    assert rig.handler.messages.empty()


async def test_malformed_frames_are_ignored_with_a_log_line(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="channels")
    await rig.link.send_raw("{this is not json")
    await rig.link.send_raw("[1, 2, 3]")
    await rig.link.send_event({"post_type": "message", "message_type": "group"})
    await rig.link.send_event(rig.impl.group_message("still alive"))
    assert (await rig.handler.next()).text == "still alive"
    assert "malformed frame ignored" in caplog.text
    assert "non-object frame ignored" in caplog.text
    assert "message event ignored" in caplog.text


async def test_handler_failure_is_logged_and_channel_goes_on(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(message: object) -> Reply:
        raise RuntimeError("handler exploded")

    rig.handler.reply = boom
    await rig.link.send_event(rig.impl.group_message("one"))
    await rig.handler.next()
    await eventually(lambda: "handler failed" in caplog.text)
    rig.handler.reply = lambda m: Reply("ok")
    await rig.link.send_event(rig.impl.group_message("two"))
    await rig.impl.wait_sent(1)


async def test_image_from_allowed_local_host() -> None:
    media = await MediaServer().start()
    media.files["pic.png"] = (PNG, "image/png")
    r = await start_rig(allow=["127.0.0.1"])
    try:
        segs = [
            {"type": "image", "data": {"file": "pic.png", "url": f"{media.base}/pic.png"}},
            {"type": "text", "data": {"text": "what is this?"}},
        ]
        await r.link.send_event(r.impl.group_message(segs))
        msg = await r.handler.next()
        assert msg.text == "what is this?"
        [image] = msg.images
        assert image.name == "pic.png"
        assert media.hits == []  # lazy: nothing fetched until someone asks
        assert await image.fetch() == PNG
        # a page pretending to be an image is not handed to the vision model
        media.files["page"] = (b"<html>hi</html>", "text/html")
        await r.link.send_event(r.impl.group_message(cq_code("image", url=f"{media.base}/page")))
        [page] = (await r.handler.next()).images
        with pytest.raises(DownloadError, match="not an image"):
            await page.fetch()
    finally:
        await r.channel.stop()
        await r.impl.close()
        await media.close()


async def test_image_from_private_host_is_refused_by_default(rig: Rig) -> None:
    media = await MediaServer().start()
    media.files["pic.png"] = (PNG, "image/png")
    try:
        segs = [{"type": "image", "data": {"file": "pic.png", "url": f"{media.base}/pic.png"}}]
        await rig.link.send_event(rig.impl.group_message(segs))
        [image] = (await rig.handler.next()).images
        with pytest.raises(DownloadRefused):
            await image.fetch()
        assert media.hits == []
    finally:
        await media.close()
