"""One-emoji answers become reactions, through the real daemon and the fake platforms.

Telegram: `setMessageReaction` on the message that asked, no text message; an emoji bots
may not react with falls back to a short message. QQ: NapCat's `set_msg_emoji_like`
where the implementation has it, else the emoji as text. Either way the turn is settled
(`delivered`) exactly like a reply, and the stored answer is the emoji.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.turn.reactions import is_single_emoji, reaction_of
from memory.turns.store import SqlStorage
from tests.channels.test_channel_e2e import telegram_section
from tests.fakes.onebot_impl import FakeOneBot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, group_chat, user
from tests.rig import daemon, settings_for
from tests.turn.test_access_e2e import QQ_GROUP, QQ_SELF, at_bot, qq_daemon, qq_settings
from tests.turn.test_bursts import mentioning, settled

ALICE = user(1001, "Alice")
GROUP = group_chat(-100900, "Emoji club")


@pytest.mark.parametrize(
    ("answer", "emoji"), [("👍", "👍"), ("  🔥\n", "🔥"), ("[React: 👍]", "👍"), ("❤️", "❤")]
)
async def test_a_one_emoji_answer_becomes_a_telegram_reaction(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    tg: FakeTelegram,
    answer: str,
    emoji: str,
) -> None:
    async with FakeOpenAI(reply=answer, model="chat-model") as chat:
        settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
        async with daemon(settings):
            asked = tg.push_message(GROUP, ALICE, **mentioning("nice, right?"))
            await tg.wait_for("setMessageReaction")
            (row,) = await settled(storage, 1)
    (reaction,) = tg.reactions
    assert (reaction["chat_id"], reaction["message_id"]) == (GROUP["id"], asked["message_id"])
    assert reaction["reaction"] == [{"type": "emoji", "emoji": emoji}]
    assert tg.sent == []  # no text message beside it
    assert row.state == "delivered"  # a reaction settles the turn like a reply
    turns = await storage.recent_turns("telegram", str(GROUP["id"]), 5)
    assert [t.role for t in turns] == ["user", "assistant"]


async def test_an_emoji_telegram_bots_cannot_react_with_is_sent_as_a_message(
    tmp_path: Path, database_url: str, storage: SqlStorage, tg: FakeTelegram
) -> None:
    async with FakeOpenAI(reply="🦖", model="chat-model") as chat:
        settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
        async with daemon(settings):
            asked = tg.push_message(GROUP, ALICE, **mentioning("what are you?"))
            (sent,) = await tg.wait_for("sendMessage")
            (row,) = await settled(storage, 1)
    assert sent.params["text"] == "🦖"
    assert sent.params["reply_parameters"]["message_id"] == asked["message_id"]
    assert tg.reactions == [] and row.state == "delivered"


async def test_text_with_an_emoji_is_a_normal_reply(
    tmp_path: Path, database_url: str, storage: SqlStorage, tg: FakeTelegram
) -> None:
    async with FakeOpenAI(reply="Sure 👍", model="chat-model") as chat:
        settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
        async with daemon(settings):
            tg.push_message(GROUP, ALICE, **mentioning("ok?"))
            (sent,) = await tg.wait_for("sendMessage")
            await settled(storage, 1)
    assert sent.params["text"] == "Sure 👍" and tg.reactions == []


@pytest.mark.parametrize("napcat", [True, False])
async def test_qq_reacts_where_napcat_can_and_falls_back_to_text(
    tmp_path: Path, database_url: str, storage: SqlStorage, napcat: bool
) -> None:
    async with FakeOpenAI(reply="👍", model="chat-model") as chat:
        impl = FakeOneBot(self_id=QQ_SELF)
        if napcat:
            impl.support_emoji_like()
        try:
            async with qq_daemon(qq_settings(tmp_path, database_url, chat), impl) as link:
                event = impl.group_message(at_bot("good idea?"), group_id=QQ_GROUP)
                await link.send_event(event)
                (row,) = await settled(storage, 1)
        finally:
            await impl.close()
    assert row.state == "delivered"
    if napcat:
        assert impl.emoji_likes == [{"message_id": event["message_id"], "emoji_id": "128077"}]
        assert impl.sent == []
    else:
        assert impl.emoji_likes == [] and [a["action"] for a in impl.refused] == [
            "set_msg_emoji_like"
        ]
        (sent,) = impl.sent
        assert sent["params"]["message"][-1]["data"]["text"] == "👍"


def test_what_counts_as_one_emoji() -> None:
    for one in ["👍", "👍🏽", "❤️", "👨‍👩‍👧", "🇨🇳", "🔥"]:
        assert is_single_emoji(one), one
    for not_one in ["", "👍👍", "ok", "👍 ok", "a", "1", "[React: 👍]"]:
        assert not is_single_emoji(not_one), not_one
    assert reaction_of("[React: 🎉]") == "🎉"
    assert reaction_of("[react:🎉]") == "🎉"
    assert reaction_of("[React: 🎉] thanks") is None
    assert reaction_of("Great 🎉") is None
