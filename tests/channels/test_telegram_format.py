"""The model's Markdown as Telegram formatting: entities the (strict) fake Bot API accepts,
for emoji and CJK text, across a split, and plain text when Telegram refuses them."""

from __future__ import annotations

from typing import Any

import pytest

from channels.formatting.telegram import entity_problems, render_telegram
from channels.formatting.telegram_split import split_formatted
from core.messages import OutboundMessage, Reply
from tests.channels.test_telegram_stream import (
    GROUP,
    Records,
    channel_on,
    open_stream,
    shows_preview,
)
from tests.fakes.manual_clock import ManualClock
from tests.fakes.telegram_server import Inbox, private_chat, user, utf16_len

ALICE = user(1001, "Alice")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(auto=True)


def covered(text: str, entity: dict[str, Any]) -> str:
    """The part of `text` an entity covers, counted in UTF-16 units as Telegram does."""
    data = text.encode("utf-16-le")
    start, end = 2 * entity["offset"], 2 * (entity["offset"] + entity["length"])
    return data[start:end].decode("utf-16-le")


def styled(message: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["type"], covered(message["text"], e)) for e in message["entities"]}


async def test_entity_offsets_hold_for_emoji_and_cjk(tg, clock) -> None:
    markdown = (
        "# 标题 🎉\n\n"
        "😀👨‍👩‍👧 **粗体 bold** then *斜体 🇯🇵* and `代码`, see [链接 😀](https://例子.com/路径).\n\n"
        "- ~~删除~~ 🙂\n\n"
        "```python\nprint('你好 🐍')\n```"
    )
    async with channel_on(tg, clock) as channel:
        sent = await channel.send(OutboundMessage("telegram", str(ALICE["id"]), markdown))
    (call,) = tg.calls_of("sendMessage")  # accepted at once: no refusal, no plain retry
    (message,) = tg.visible(ALICE["id"])
    assert sent.message_ids == (str(message["message_id"]),)
    assert call.params["entities"] == message["entities"] and "parse_mode" not in call.params
    assert "**" not in message["text"] and "```" not in message["text"]
    assert styled(message) == {
        ("bold", "标题 🎉"),
        ("bold", "粗体 bold"),
        ("italic", "斜体 🇯🇵"),
        ("code", "代码"),
        ("text_link", "链接 😀"),
        ("strikethrough", "删除"),
        ("pre", "print('你好 🐍')"),
    }
    link = next(e for e in message["entities"] if e["type"] == "text_link")
    pre = next(e for e in message["entities"] if e["type"] == "pre")
    assert link["url"] == "https://xn--fsqu00a.com/%E8%B7%AF%E5%BE%84"  # as a browser sends it
    assert pre["language"] == "python"


async def test_a_long_formatted_reply_splits_with_valid_entities_in_every_piece(tg, clock) -> None:
    paragraph = "**粗体😀文字** 和 *斜体🎉* 以及 `代码` 还有更多的中文内容。" * 6
    markdown = "\n\n".join(f"{i}. {paragraph}" for i in range(1, 40))
    pieces = split_formatted(render_telegram(markdown))
    assert len(pieces) >= 2 and all(not entity_problems(p) for p in pieces)
    async with channel_on(tg, clock) as channel:
        await channel.send(OutboundMessage("telegram", str(GROUP["id"]), markdown))
    visible = tg.visible(GROUP["id"])
    assert len(tg.calls_of("sendMessage")) == len(visible) == len(pieces)  # none refused
    assert all(utf16_len(m["text"]) <= 4096 and m["entities"] for m in visible)
    for message in visible:  # no entity was cut or shifted by the split
        assert styled(message) == {("bold", "粗体😀文字"), ("italic", "斜体🎉"), ("code", "代码")}


async def test_refused_formatting_goes_out_as_the_same_text_plain(tg, clock) -> None:
    tg.refuse_entities()
    async with channel_on(tg, clock) as channel:
        sent = await channel.send(
            OutboundMessage("telegram", str(ALICE["id"]), "Use **green** tea, *not* black.")
        )
    first, second = tg.calls_of("sendMessage")
    assert first.params["entities"] and "entities" not in second.params
    assert [m["text"] for m in tg.visible(ALICE["id"])] == ["Use green tea, not black."]
    assert len(sent.message_ids) == 1


async def test_a_refused_final_edit_falls_back_to_plain_and_is_not_lost(tg, clock) -> None:
    async with channel_on(tg, clock) as channel:
        stream = open_stream(channel, GROUP["id"], Records())
        await stream.show("Green tea is best. It")
        await shows_preview(tg, GROUP["id"], "Green tea is best. It")
        tg.refuse_entities()
        await stream.finish("Green tea is **best**. It is mild.")
    assert [m["text"] for m in tg.visible(GROUP["id"])] == ["Green tea is best. It is mild."]
    assert tg.edits[-1].get("entities") is None


async def test_our_own_answers_go_out_as_written(tg, clock) -> None:
    """Command answers may quote what users stored: `*` and `#` are shown, not parsed."""
    text = "Your memories:\n1. likes *stars* and #tea\n2. name is __init__"
    async with channel_on(tg, clock, inbox=Inbox(lambda m: Reply(text))):
        tg.push_message(private_chat(ALICE), ALICE, "/memory")
        (call,) = await tg.wait_for("sendMessage")
    assert call.params["text"] == text and "entities" not in call.params
