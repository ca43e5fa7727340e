"""Streamed Telegram replies against the fake Bot API, paced in virtual time.

The test plays the core: it opens the channel's stream, shows the growing text the way
the tool loop does, and finishes it with the stored reply. What is judged is what the
chat shows (the fake applies every send, edit and delete) and the virtual times of the
calls Telegram saw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest

from channels.config import TelegramConfig
from channels.formatting.telegram import FormattedText, render_telegram
from channels.formatting.telegram_split import split_formatted
from channels.telegram.app import TelegramTimings
from channels.telegram.channel import TelegramChannel
from channels.telegram.stream import TelegramStream, worth_a_message
from core.messages import OutboundMessage
from tests.channels.test_telegram import FAST, POLICY
from tests.fakes.door import start_answering
from tests.fakes.manual_clock import ManualClock
from tests.fakes.telegram_server import FakeTelegram, Inbox, group_chat, user, utf16_len

ALICE = user(1001, "Alice")
GROUP = group_chat(-100500, "Tea party")
INTERVAL = 1.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(auto=True)


@asynccontextmanager
async def channel_on(
    tg: FakeTelegram,
    clock: ManualClock,
    *,
    per_minute: int = 20,
    inbox: Inbox | None = None,
    timings: TelegramTimings = FAST,
    **config: Any,
) -> AsyncIterator[TelegramChannel]:
    cfg = TelegramConfig(
        enabled=True, token=tg.token, api_base_url=tg.root, poll_stall_s=30.0, **config
    )
    timings = replace(timings, group_sends_per_min=per_minute)
    channel = TelegramChannel(cfg, timings=timings, clock=clock)
    inbox = inbox or Inbox()
    inbox.door.answers = POLICY.triggers  # the daemon's decision, as its dispatcher makes it
    await start_answering(channel, inbox)
    try:
        yield channel
    finally:
        await channel.stop()


class Records:
    """The core's side of `record`: what the channel asked to store, in order."""

    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] = []

    async def __call__(self, record: dict[str, Any]) -> None:
        self.saved.append(record)

    def ids(self) -> list[list[int]]:
        return [entry["stream"]["message_ids"] for entry in self.saved]


def reply_to(chat_id: int, text: str = "", **extra: Any) -> OutboundMessage:
    return OutboundMessage("telegram", str(chat_id), text, **extra)


def open_stream(
    channel: TelegramChannel, chat_id: int, records: Records, **extra: Any
) -> TelegramStream:
    stream = channel.open_stream(reply_to(chat_id, **extra), records)
    assert stream is not None
    return stream


def preview_pieces(markdown: str) -> list[str]:
    """The texts a preview of `markdown` should show, message by message."""
    return [p.text for p in split_formatted(FormattedText(render_telegram(markdown).text))]


def final_pieces(markdown: str) -> list[dict[str, Any]]:
    return [
        {"text": p.text, "entities": p.to_bot_api()}
        for p in split_formatted(render_telegram(markdown))
    ]


def seen(tg: FakeTelegram, chat_id: int) -> list[dict[str, Any]]:
    return [{"text": m["text"], "entities": m["entities"]} for m in tg.visible(chat_id)]


async def shows_preview(tg: FakeTelegram, chat_id: int, markdown: str) -> None:
    """Wait until the chat shows the preview of `markdown` (messages, then the draft)."""
    expected = preview_pieces(markdown)

    def done() -> bool:
        texts = [m["text"] for m in tg.visible(chat_id)]
        if chat_id < 0:
            return texts == expected
        draft = tg.drafts[-1]["text"] if tg.drafts else None
        return texts == expected[:-1] and draft == expected[-1]

    await tg.wait_until(done)


def gaps(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(times, times[1:], strict=False)]


def busiest_minute(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 60.0) for start in times)


SENTENCES = [f"Point {i:03d} is made here, plainly and in order." for i in range(140)]


async def test_dm_draft_grows_then_one_final_formatted_message(tg, clock) -> None:
    records = Records()
    final = "**Tea** is brewed " + " ".join(SENTENCES[:8])
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, ALICE["id"], records)
        for n in range(1, 9):
            text = "**Tea** is brewed " + " ".join(SENTENCES[:n])
            await stream.show(text)
            await shows_preview(tg, ALICE["id"], text)
        sent = await stream.finish(final)
    drafts = tg.drafts
    assert len(drafts) == 8 and len({d["draft_id"] for d in drafts}) == 1
    assert drafts[0]["draft_id"] != 0
    texts = [d["text"] for d in drafts]
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:], strict=False))
    assert all("**" not in t for t in texts)  # a preview shows rendered text, not markup
    draft_times = [c.at for c in tg.calls_of("sendMessageDraft")]
    assert min(gaps(draft_times)) >= INTERVAL  # at most one update per stream_interval_s
    (message,) = tg.calls_of("sendMessage")
    assert seen(tg, ALICE["id"]) == final_pieces(final)
    assert message.params["entities"][0] == {"type": "bold", "offset": 0, "length": 3}
    assert sent.message_ids == (str(tg.visible(ALICE["id"])[0]["message_id"]),)
    assert records.ids() == [[int(sent.message_ids[0])]]


async def test_group_answer_is_one_message_edited_in_place_within_the_budget(tg, clock) -> None:
    tg.limit_per_chat(20)  # Telegram's group limit; the channel must never trip it
    records = Records()
    question = 77
    final = " ".join(SENTENCES[:50]) + "\n\nIn **short**: tea."
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records, reply_to_message_id=str(question))
        for n in range(1, 51):
            text = " ".join(SENTENCES[:n])
            await stream.show(text)
            await shows_preview(tg, GROUP["id"], text)
        finished_at = clock.now
        sent = await stream.finish(final)
    (first,) = tg.calls_of("sendMessage")  # one message; everything else is an edit
    assert first.params["reply_parameters"]["message_id"] == question
    assert len(tg.edits) == 50  # 49 growing previews and the final, formatted edit
    assert seen(tg, GROUP["id"]) == final_pieces(final)
    assert tg.edits[-1]["entities"] == final_pieces(final)[0]["entities"]
    times = tg.paced_calls(GROUP["id"])
    assert tg.rate_limited == [] and busiest_minute(times) <= 20
    assert min(gaps(times[:-1])) >= INTERVAL  # previews; the final edit goes out at once:
    assert times[-1] == finished_at  # previews left room in the budget for it
    first_id = tg.visible(GROUP["id"])[0]["message_id"]
    assert records.ids() == [[first_id]]
    assert sent.message_ids == (str(first_id),)


async def test_429_past_20_a_minute_is_honoured_and_the_final_edit_lands(tg, clock) -> None:
    tg.limit_per_chat(20)
    records = Records()
    final = " ".join(SENTENCES[:40]) + " **Done.**"
    # a channel that budgets more than the group allows meets the 429s and must obey them
    async with channel_on(tg, clock, per_minute=60) as channel:
        stream = open_stream(channel, GROUP["id"], records)
        n = 0
        while len(tg.rate_limited) < 2:
            n += 1
            text = " ".join(SENTENCES[:n])
            await stream.show(text)
            await shows_preview(tg, GROUP["id"], text)
        await stream.show(" ".join(SENTENCES[: n + 1]))
        sent = await stream.finish(final)  # while the chat may still be held
    assert seen(tg, GROUP["id"]) == final_pieces(final)
    assert len(tg.calls_of("sendMessage")) == 1 and len(sent.message_ids) == 1
    for refusal in tg.rate_limited:
        after = tg.calls[tg.calls.index(refusal["call"]) + 1 :]
        later = [c.at for c in after if c.method in ("sendMessage", "editMessageText")]
        assert later and min(later) >= refusal["at"] + refusal["retry_after"]


async def test_6000_characters_arrive_whole_in_two_messages_with_no_part_twice(tg, clock) -> None:
    records = Records()
    final = " ".join(SENTENCES)  # about 6,700 characters
    assert utf16_len(final) > 6000
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records)
        for n in range(10, len(SENTENCES) + 1, 10):
            text = " ".join(SENTENCES[:n])
            await stream.show(text)
            await shows_preview(tg, GROUP["id"], text)
        sent = await stream.finish(final)
    visible = tg.visible(GROUP["id"])
    assert len(visible) == 2 and len(tg.calls_of("sendMessage")) == 2
    assert all(utf16_len(m["text"]) <= 4096 for m in visible)
    together = " ".join(m["text"] for m in visible)
    assert all(together.count(f"Point {i:03d} ") == 1 for i in range(len(SENTENCES)))
    assert together.split() == final.split()
    ids = [m["message_id"] for m in visible]
    assert records.ids() == [ids[:1], ids]  # recorded as soon as each message existed
    assert sent.message_ids == tuple(str(i) for i in ids)


async def test_a_dm_longer_than_one_message_keeps_finished_parts_as_messages(tg, clock) -> None:
    records = Records()
    final = " ".join(SENTENCES)
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, ALICE["id"], records)
        for n in (40, 80, 120, len(SENTENCES)):
            text = " ".join(SENTENCES[:n])
            await stream.show(text)
            await shows_preview(tg, ALICE["id"], text)
        sent = await stream.finish(final)
    visible = tg.visible(ALICE["id"])
    assert [m["text"] for m in visible] == [p["text"] for p in final_pieces(final)]
    assert len(tg.calls_of("sendMessage")) == 2  # the first part early, the rest at the end
    assert all(utf16_len(d["text"]) <= 4096 for d in tg.drafts)
    assert sent.message_ids == tuple(str(m["message_id"]) for m in visible)


async def test_a_crashed_group_stream_is_completed_in_the_same_message(tg, clock) -> None:
    records = Records()
    partial = " ".join(SENTENCES[:5])
    final = " ".join(SENTENCES[:12]) + " **End.**"
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records, reply_to_message_id="5")
        await stream.show(partial)
        await shows_preview(tg, GROUP["id"], partial)
        await stream.close()  # the process died here; the core kept the record
        sent = await channel.send(
            reply_to(GROUP["id"], final, reply_to_message_id="5", resume=records.saved[-1])
        )
    assert len(tg.calls_of("sendMessage")) == 1  # no second copy
    assert seen(tg, GROUP["id"]) == final_pieces(final)
    assert sent.message_ids == (str(records.ids()[-1][0]),)


async def test_recovery_edits_the_recorded_message_and_sends_only_the_missing_part(
    tg, clock
) -> None:
    records = Records()
    final = " ".join(SENTENCES)  # two messages' worth
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records)
        await stream.show(" ".join(SENTENCES[:20]))
        await shows_preview(tg, GROUP["id"], " ".join(SENTENCES[:20]))
        await stream.close()
        await channel.send(reply_to(GROUP["id"], final, resume=records.saved[-1]))
        # a second recovery after a crash before `delivered`: nothing changes, nothing sent
        again = await channel.send(
            reply_to(GROUP["id"], final, resume={"stream": {"message_ids": list(tg_ids(tg))}})
        )
    assert len(tg.calls_of("sendMessage")) == 2
    assert seen(tg, GROUP["id"]) == final_pieces(final)
    assert again.message_ids == tuple(str(i) for i in tg_ids(tg))


def tg_ids(tg: FakeTelegram) -> list[int]:
    return [m["message_id"] for m in tg.visible(GROUP["id"])]


async def test_a_recorded_message_someone_deleted_is_sent_anew_in_order(tg, clock) -> None:
    records = Records()
    final = " ".join(SENTENCES)
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records)
        text = " ".join(SENTENCES)
        await stream.show(text)
        await shows_preview(tg, GROUP["id"], text)
        await stream.close()
        first, second = records.ids()[-1]
        tg.delete_by_user(GROUP["id"], first)
        await channel.send(reply_to(GROUP["id"], final, resume=records.saved[-1]))
    visible = tg.visible(GROUP["id"])
    assert [m["text"] for m in visible] == [p["text"] for p in final_pieces(final)]
    assert second not in [m["message_id"] for m in visible]  # re-sent after the new first


async def test_a_rerun_turn_continues_in_the_recorded_message(tg, clock) -> None:
    records = Records()
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records)
        await stream.show(" ".join(SENTENCES[:3]))
        await shows_preview(tg, GROUP["id"], " ".join(SENTENCES[:3]))
        await stream.close()  # died mid-stream; recovery runs the turn again
        rerun = open_stream(channel, GROUP["id"], Records(), resume=records.saved[-1])
        await rerun.show("Starting over.")
        await shows_preview(tg, GROUP["id"], "Starting over.")
        await rerun.finish("Starting over: **tea**.")
    assert len(tg.calls_of("sendMessage")) == 1
    assert seen(tg, GROUP["id"]) == final_pieces("Starting over: **tea**.")


async def test_a_tool_status_replaces_the_preview_and_the_answer_follows(tg, clock) -> None:
    records = Records()
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], records)
        for text in ("Let me check that.", "🔎 searching: tea prices", "Tea costs 3 coins."):
            await stream.show(text)
            await shows_preview(tg, GROUP["id"], text)
        await stream.finish("Tea costs **3 coins**.")
    assert [e["text"] for e in tg.edits] == [
        "🔎 searching: tea prices",
        "Tea costs 3 coins.",
        "Tea costs 3 coins.",  # the same words, now with their formatting
    ]
    assert seen(tg, GROUP["id"]) == final_pieces("Tea costs **3 coins**.")


async def test_a_group_preview_waits_for_a_sentence(tg, clock) -> None:
    assert not worth_a_message("Well")
    assert not worth_a_message("🔎 searching: tea")
    assert worth_a_message("Well, it depends. Tea")
    assert worth_a_message("中文的句子也一样可以分开。然后")
    assert worth_a_message("x" * 130)
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], Records())
        await stream.show("Well")
        await stream.finish("Well.")
    (only,) = tg.calls_of("sendMessage")  # nothing was worth previewing: one plain send
    assert only.params["text"] == "Well." and tg.edits == []


async def test_drafts_refused_fall_back_to_a_message_preview(tg, clock) -> None:
    tg.refuse_drafts()  # an older Bot API server
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, ALICE["id"], Records())
        await stream.show("Hello there. How")
        await tg.wait_until(lambda: len(tg.visible(ALICE["id"])) == 1)
        await stream.finish("Hello there. How are you?")
    assert [m["text"] for m in tg.visible(ALICE["id"])] == ["Hello there. How are you?"]
    assert len(tg.calls_of("sendMessage")) == 1


async def test_streaming_off_gives_no_stream(tg, clock) -> None:
    async with channel_on(tg, clock, streaming="off") as channel:
        assert channel.open_stream(reply_to(ALICE["id"]), Records()) is None
        assert channel.open_stream(reply_to(GROUP["id"]), Records()) is None


async def test_a_draft_is_shown_again_before_it_fades(tg, clock) -> None:
    """A draft lasts 30 s; while the model is quiet (a long search) it is refreshed."""
    quick = replace(FAST, draft_keepalive_s=0.05)
    async with channel_on(tg, clock, timings=quick) as channel:
        stream = open_stream(channel, ALICE["id"], Records())
        await stream.show("Searching for the best tea. One moment")
        await tg.wait_for("sendMessageDraft", count=3)
        await stream.finish("Searching for the best tea. One moment: green.")
    first, *again = tg.drafts
    assert all(d["text"] == first["text"] and d["draft_id"] == first["draft_id"] for d in again)
