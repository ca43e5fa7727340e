"""Streamed replies through the whole daemon: bot.wiring.app.App, the real Telegram channel and
the tool loop, against the fake Bot API and a fake model that streams slowly.

What a user relies on: the answer starts showing while the model writes, a tool marker
never shows (not in a draft, a message or an edit), and the chat ends with the stored
reply, formatted, once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from channels.formatting.telegram import render_telegram
from memory.turns.store import SqlStorage
from tests.channels.test_channel_e2e import BOT, daemon, mention, telegram_section
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.fakes.openai_stream import StreamShape
from tests.fakes.telegram_server import FakeTelegram, group_chat, private_chat, user
from tests.rig import settings_for

ALICE = user(1001, "Alice")
GROUP = group_chat(-100777, "Streaming club")
ANSWER = (
    "Noted, you like **green tea**. Here is more: green tea is made from unoxidised leaves, "
    "and it is popular across East Asia. Brew it at about 80 °C for two minutes. 🍵"
)
SLOW = StreamShape(piece_chars=8, delay_s=0.06)


def model(body: dict[str, Any]) -> str:
    """First round asks to remember (a marker the user must never see), then answers."""
    last = last_user_text(body) or ""
    if "Remembered about" in last:
        return ANSWER
    return "Let me note that. [Remember: likes green tea] one moment"


FAKE_CHAT = {"reply": model, "stream_shape": SLOW}  # served by conftest.py's `chat` fixture


def shown_texts(tg: FakeTelegram, chat_id: int) -> list[str]:
    methods = ("sendMessage", "editMessageText", "sendMessageDraft")
    return [
        str(call.params.get("text", ""))
        for method in methods
        for call in tg.calls_of(method)
        if int(call.params["chat_id"]) == chat_id
    ]


def assert_no_marker(texts: list[str]) -> None:
    leaked = [t for t in texts if "[" in t or "Remember:" in t]
    assert not leaked, leaked


async def stored_reply(storage: SqlStorage, chat_id: int) -> str:
    turns = await storage.recent_turns("telegram", str(chat_id), 20)
    return [t.content for t in turns if t.role == "assistant" and t.kind == "message"][-1]


async def test_a_dm_answer_grows_as_a_draft_and_ends_as_one_formatted_message(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    section = {**telegram_section(tg), "stream_interval_s": 0.3}
    async with daemon(settings_for(tmp_path, database_url, chat, telegram=section)):
        tg.push_message(private_chat(ALICE), ALICE, "I like green tea")
        finals = await tg.wait_for("sendMessage", 1, within_s=15)

    drafts = [c.params["text"] for c in tg.calls_of("sendMessageDraft")]
    assert len(drafts) >= 2  # it showed while the model wrote
    assert not [d for d in drafts if "**" in d]  # an open bold never shows as symbols
    assert len({c.params["draft_id"] for c in tg.calls_of("sendMessageDraft")}) == 1
    assert_no_marker(shown_texts(tg, ALICE["id"]))
    (final,) = finals
    rendered = render_telegram(ANSWER)
    assert final.params["text"] == rendered.text
    assert any(e["type"] == "bold" for e in final.params.get("entities", []))
    assert await stored_reply(storage, ALICE["id"]) == ANSWER


async def test_a_group_answer_is_one_message_edited_in_place(
    tmp_path: Path, database_url: str, storage: SqlStorage, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    section = {**telegram_section(tg), "stream_interval_s": 0.3}
    async with daemon(settings_for(tmp_path, database_url, chat, telegram=section)):
        text = f"@{BOT} I like green tea"
        question = tg.push_message(GROUP, ALICE, text, entities=mention(text))
        rendered = render_telegram(ANSWER)
        await tg.wait_until(
            lambda: [m["text"] for m in tg.visible(GROUP["id"])] == [rendered.text],
            within_s=15,
        )
    # The daemon has stopped (its turns drained): every call it made is counted below.
    sends = [c for c in tg.calls_of("sendMessage") if c.params["chat_id"] == GROUP["id"]]
    assert len(sends) == 1  # one message, grown by edits
    assert sends[0].params["reply_parameters"]["message_id"] == question["message_id"]
    edits = tg.calls_of("editMessageText")
    assert len(edits) >= 2 and len({c.params["message_id"] for c in edits}) == 1
    assert_no_marker(shown_texts(tg, GROUP["id"]))
    assert edits[-1].params["text"] == rendered.text and edits[-1].params.get("entities")
    assert await stored_reply(storage, GROUP["id"]) == ANSWER
    group_id, question_id = str(GROUP["id"]), str(question["message_id"])
    entry = await storage.intake.by_message("telegram", group_id, question_id)
    assert entry is not None and entry.state == "delivered"
