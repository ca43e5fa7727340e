"""Telegram channel conversations, end to end through python-telegram-bot and FakeTelegram."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from channels.config import TelegramConfig
from channels.telegram.app import TelegramTimings
from channels.telegram.channel import TelegramChannel
from core.media.fetch import DownloadTooLarge
from core.messages import ChatType, InboundMessage, OutboundMessage, Reply
from core.turn.triggers import TriggerPolicy
from tests.fakes.door import start_answering
from tests.fakes.telegram_server import (
    FakeTelegram,
    Inbox,
    entity,
    group_chat,
    private_chat,
    sticker,
    user,
    utf16_len,
)

FAST = TelegramTimings(
    poll_timeout_s=0.5,
    poll_interval_s=0.01,
    request_timeout_s=5.0,
    watchdog_check_s=0.05,
    restart_backoff_s=0.05,
    restart_backoff_max_s=0.2,
    stop_updater_s=0.3,
    stop_grace_s=2.0,
    send_backoff_s=0.01,
    image_timeout_s=3.0,
)
BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice", "Liddell", username="alice")
BOB = user(1002, "Bob")
GROUP = group_chat(-100500, "Tea party")
POLICY = TriggerPolicy.create(BOT, [])  # as the daemon passes its dispatcher's policy


@asynccontextmanager
async def running(
    tg: FakeTelegram, inbox: Inbox, *, image_max_bytes: int = 1 << 20, **config: Any
) -> AsyncIterator[TelegramChannel]:
    config.setdefault("poll_stall_s", 30.0)
    cfg = TelegramConfig(enabled=True, token=tg.token, api_base_url=tg.root, **config)
    channel = TelegramChannel(cfg, image_max_bytes=image_max_bytes, timings=FAST)
    inbox.door.answers = POLICY.triggers  # the daemon's decision, as its dispatcher makes it
    await start_answering(channel, inbox)
    try:
        yield channel
    finally:
        await channel.stop()


def echo(message: InboundMessage) -> Reply:
    return Reply(f"echo: {message.text}")


async def test_dm_round_trip_with_typing_and_commands_registered(tg, caplog) -> None:
    caplog.set_level(logging.DEBUG)

    async def slow_echo(message: InboundMessage) -> Reply:
        await tg.wait_for("sendChatAction")  # "typing..." is shown while we work
        return echo(message)

    inbox = Inbox(slow_echo)
    async with running(tg, inbox) as channel:
        tg.push_message(private_chat(ALICE), ALICE, "hello there")
        (sent,) = await tg.wait_for("sendMessage")
        health = channel.health()
    (msg,) = inbox.messages
    assert (msg.platform, msg.chat_id, msg.chat_type) == ("telegram", "1001", ChatType.PRIVATE)
    assert (msg.sender_id, msg.sender_name, msg.text) == ("1001", "Alice Liddell", "hello there")
    assert sent.params["chat_id"] == 1001 and sent.params["text"] == "echo: hello there"
    assert "reply_parameters" not in sent.params  # no quoting in a private chat
    assert "parse_mode" not in sent.params  # plain text: never a parse error
    assert tg.calls_of("sendChatAction")[0].params["action"] == "typing"
    commands = tg.calls_of("setMyCommands")[0].params["commands"]
    assert {c["command"] for c in commands} >= {"help", "memory"}
    assert health.state == "running" and health.last_ok is not None
    assert channel.health().state == "stopped"
    ours = [r for r in caplog.records if r.name.startswith("channels.")]
    assert ours and all(tg.token not in r.getMessage() for r in ours)


async def test_group_message_without_mention_reaches_handler_but_gets_no_reply(tg) -> None:
    inbox = Inbox(lambda m: None if m.chat_type is ChatType.GROUP else echo(m))
    async with running(tg, inbox):
        tg.push_message(GROUP, BOB, "just chatting")
        tg.push_message(private_chat(ALICE), ALICE, "barrier")
        await tg.wait_for("sendMessage")
        messages = await inbox.wait(2)
    group_msg = messages[0]
    assert group_msg.chat_type is ChatType.GROUP and group_msg.chat_id == str(GROUP["id"])
    assert not group_msg.mentions_bot and not group_msg.reply_to_bot
    assert [c.params["chat_id"] for c in tg.calls_of("sendMessage")] == [ALICE["id"]]
    assert all(c.params["chat_id"] != GROUP["id"] for c in tg.calls_of("sendChatAction"))


async def test_group_mention_after_emoji_uses_utf16_offsets_and_replies_threaded(tg) -> None:
    text = f"😀🎉 hey @{BOT} how are you? cc @someone"
    assert utf16_len(text) != len(text)  # the emoji make the two counts differ
    mention = entity("mention", text, f"@{BOT}")
    other = entity("mention", text, "@someone")
    inbox = Inbox(lambda m: echo(m) if m.mentions_bot else None)  # as the daemon decides
    async with running(tg, inbox):
        msg = tg.push_message(GROUP, ALICE, text, entities=[mention, other])
        tg.push_message(
            GROUP,
            BOB,
            "😀😀 @someone only",
            entities=[entity("mention", "😀😀 @someone only", "@someone")],
        )
        (sent,) = await tg.wait_for("sendMessage")
        got = await inbox.wait(2)
    assert got[0].mentions_bot and not got[1].mentions_bot
    assert sent.params["chat_id"] == GROUP["id"]
    assert sent.params["reply_parameters"]["message_id"] == msg["message_id"]


async def test_text_mention_of_the_bot_counts(tg) -> None:
    text = "Chatterd, wake up"
    mention = entity("text_mention", text, "Chatterd", user=tg.bot_user)
    inbox = Inbox(echo)
    async with running(tg, inbox):
        tg.push_message(GROUP, ALICE, text, entities=[mention])
        (msg,) = await inbox.wait(1)
    assert msg.mentions_bot


async def test_reply_to_bot_is_flagged_with_the_replied_sender(tg) -> None:
    inbox = Inbox(echo)
    async with running(tg, inbox):
        bot_msg = tg.message(GROUP, tg.bot_user, "I said something earlier")
        tg.push_message(GROUP, ALICE, "and I answer you", reply_to_message=bot_msg)
        other = tg.message(GROUP, BOB, "bob's words")
        tg.push_message(GROUP, ALICE, "answering bob", reply_to_message=other)
        got = await inbox.wait(2)
    assert got[0].reply_to_bot and got[0].reply_to_sender_id == str(tg.bot_user["id"])
    assert not got[1].reply_to_bot and got[1].reply_to_sender_id == str(BOB["id"])


async def test_command_for_another_bot_is_dropped_and_ours_normalised(tg) -> None:
    inbox = Inbox(echo)
    async with running(tg, inbox):
        for text in ("/help@otherbot", f"/help@{BOT.upper()} please"):
            cmd = text.split()[0]
            tg.push_message(GROUP, ALICE, text, entities=[entity("bot_command", text, cmd)])
        (sent,) = await tg.wait_for("sendMessage")
        got = await inbox.wait(1)
    assert [m.text for m in got] == ["/help please"]
    assert sent.params["text"] == "echo: /help please"


async def test_photo_with_caption_is_fetched_lazily_through_getfile(tg) -> None:
    original = b"\xff\xd8\xff" + b"large-jpeg-bytes" * 50
    inbox = Inbox()
    async with running(tg, inbox):
        photo = tg.add_photo(original, thumb=b"tiny")
        tg.push_message(private_chat(ALICE), ALICE, None, caption="what is this?", photo=photo)
        (msg,) = await inbox.wait(1)
        assert msg.text == "what is this?" and len(msg.images) == 1
        assert tg.calls_of("getFile") == []  # nothing downloaded until asked
        image = msg.images[0]
        assert image.mime == "image/jpeg"
        assert await image.fetch() == original
        (call,) = tg.calls_of("getFile")
        assert call.params["file_id"] == photo[-1]["file_id"]  # the largest size


async def test_photo_over_the_size_cap_is_refused(tg) -> None:
    big = b"x" * 5000
    inbox = Inbox()
    async with running(tg, inbox, image_max_bytes=1000):
        tg.push_message(private_chat(ALICE), ALICE, None, photo=tg.add_photo(big))
        liar = tg.add_file(big, declared_size=10)  # sizes claimed small, bytes are not
        lie = [{"file_id": liar, "file_unique_id": "ul", "width": 9, "height": 9, "file_size": 10}]
        tg.push_message(private_chat(ALICE), ALICE, None, photo=lie)
        honest, lying = await inbox.wait(2)
        with pytest.raises(DownloadTooLarge):
            await honest.images[0].fetch()
        assert tg.calls_of("getFile") == []  # refused on the declared size alone
        with pytest.raises(DownloadTooLarge):
            await lying.images[0].fetch()


async def test_long_reply_is_split_and_only_the_first_piece_quotes(tg) -> None:
    long_text = "\n\n".join(f"Paragraph {i}. " + "words " * 150 for i in range(12))
    inbox = Inbox(lambda m: Reply(long_text))
    async with running(tg, inbox):
        msg = tg.push_message(
            GROUP,
            ALICE,
            f"@{BOT} essay please",
            entities=[entity("mention", f"@{BOT} essay please", f"@{BOT}")],
        )
        await inbox.wait(1)
        await tg.wait_for("sendMessage", count=3)
        await asyncio.sleep(0)
    pieces = tg.sent
    assert len(pieces) >= 3 and all(utf16_len(p["text"]) <= 4096 for p in pieces)
    assert pieces[0]["reply_parameters"]["message_id"] == msg["message_id"]
    assert all("reply_parameters" not in p for p in pieces[1:])
    assert " ".join(p["text"] for p in pieces).split() == long_text.split()


async def test_forum_topic_is_kept_and_topic_root_is_not_a_reply(tg) -> None:
    forum = group_chat(-100777, "Forum", forum=True)
    inbox = Inbox(echo)
    async with running(tg, inbox):
        root = tg.message(
            forum,
            BOB,
            None,
            message_thread_id=77,
            forum_topic_created={"name": "Cats", "icon_color": 7322096},
        )
        text = f"@{BOT} hi from the topic"
        msg = tg.push_message(
            forum,
            ALICE,
            text,
            message_thread_id=77,
            is_topic_message=True,
            reply_to_message=root,
            entities=[entity("mention", text, f"@{BOT}")],
        )
        (sent,) = await tg.wait_for("sendMessage")
        (got,) = await inbox.wait(1)
    assert got.thread_id == "77" and got.reply_to_sender_id is None and not got.reply_to_bot
    assert sent.params["message_thread_id"] == 77
    assert sent.params["reply_parameters"]["message_id"] == msg["message_id"]


async def test_private_reply_goes_to_dm_or_asks_to_start_the_bot(tg) -> None:
    inbox = Inbox(lambda m: Reply(f"your memories, {m.sender_name}", private=True))
    tg.forbid_private(BOB["id"])
    async with running(tg, inbox):
        text = "/memory"
        tg.push_message(GROUP, ALICE, text, entities=[entity("bot_command", text, text)])
        await tg.wait_for("sendMessage", where=lambda c: c.params["chat_id"] == ALICE["id"])
        bob_msg = tg.push_message(GROUP, BOB, text, entities=[entity("bot_command", text, text)])
        await tg.wait_for("sendMessage", where=lambda c: c.params["chat_id"] == GROUP["id"])
    to_alice, to_group = tg.sent
    assert to_alice["text"] == "your memories, Alice Liddell"
    assert "press Start" in to_group["text"] and f"@{BOT}" in to_group["text"]
    assert "memories" not in to_group["text"]  # the private text never lands in the group
    assert to_group["reply_parameters"]["message_id"] == bob_msg["message_id"]


async def test_emoji_and_rtl_names_are_cleaned(tg) -> None:
    tricky = user(2001, "\u202eAlice\u200f🦄", "\u0639\u0631\u0628\u064a\n\u05e9\u05dc\u05d5\u05dd")
    invisible = user(2002, "\u202e\u2066\u200b", username="ghost")
    long_name = user(2003, "N" * 100)
    inbox = Inbox()
    async with running(tg, inbox):
        for who in (tricky, invisible, long_name):
            tg.push_message(private_chat(who), who, "hi")
        got = await inbox.wait(3)
    names = [m.sender_name for m in got]
    assert names[0] == "Alice🦄 \u0639\u0631\u0628\u064a \u05e9\u05dc\u05d5\u05dd"
    assert names[1] == "@ghost"
    assert names[2] == "N" * 64


async def test_unreadable_media_is_reported_as_a_fact_and_the_channel_sends_nothing(tg) -> None:
    """The channel says what it saw; whether anyone is told is the dispatcher's call
    (tests/channels/test_channel_e2e.py: the notice leaves through the one door)."""
    inbox = Inbox(lambda m: None)
    async with running(tg, inbox):
        # (voice notes and documents are read now: a sticker is what is left unreadable)
        tg.push_message(private_chat(ALICE), ALICE, None, sticker=sticker())
        tg.push_message(GROUP, BOB, None, sticker=sticker())
        tg.push_message(private_chat(ALICE), ALICE, None)  # nothing at all: not even reported
        tg.push_message(private_chat(ALICE), ALICE, "barrier")
        messages = await inbox.wait(3)
    assert sorted((m.chat_type, m.text, m.unreadable) for m in messages) == [
        (ChatType.GROUP, "", True),
        (ChatType.PRIVATE, "", True),
        (ChatType.PRIVATE, "barrier", False),
    ]
    assert tg.calls_of("sendMessage") == []


@pytest.mark.parametrize("answer_edited", [False, True])
async def test_edited_messages_follow_answer_edited(tg, answer_edited: bool) -> None:
    inbox = Inbox()
    async with running(tg, inbox, answer_edited=answer_edited):
        edited = tg.message(private_chat(ALICE), ALICE, "fixed typo", edit_date=1_900_000_000)
        tg.push({"edited_message": edited})
        tg.push_message(private_chat(ALICE), ALICE, "barrier")
        await inbox.wait(1 + answer_edited)
    texts = [m.text for m in inbox.messages]
    if answer_edited:
        assert texts == ["fixed typo", "barrier"]
        assert inbox.messages[0].message_id == f"{edited['message_id']}:edit:1900000000"
    else:
        assert texts == ["barrier"]


async def test_send_delivers_daemon_messages_to_the_right_thread(tg) -> None:
    async with running(tg, Inbox()) as channel:
        await channel.send(
            OutboundMessage(
                "telegram",
                str(GROUP["id"]),
                "scheduled note",
                reply_to_message_id="42:edit:1",
                thread_id="9",
            )
        )
        with pytest.raises(ValueError):
            await channel.send(OutboundMessage("qq", "1", "wrong platform"))
    (sent,) = tg.sent
    assert sent["chat_id"] == GROUP["id"] and sent["message_thread_id"] == 9
    assert sent["reply_parameters"]["message_id"] == 42
