"""Chat commands (/help, /reset, /context, /memory) on real storage, through Commands.handle
and, where the wiring matters, through the Dispatcher with the model on FakeOpenAI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.commands.table import Commands, parse_command
from core.messages import Reply
from core.tools.memory import remember_tool
from core.tools.registry import ToolContext
from memory.memories.service import MAX_PER_USER
from memory.memories.types import NewMemory
from memory.turns.store import SqlStorage
from tests.rig import ADMIN, Rig, build_rig, msg

ADMIN_ID = ADMIN.split(":", 1)[1]


@pytest.fixture
async def rig(storage: SqlStorage, tmp_path: Path) -> AsyncIterator[Rig]:
    async with build_rig(storage, tmp_path) as built:
        yield built


@pytest.fixture
def commands(rig: Rig) -> Commands:
    return rig.commands


async def say(commands: Commands, text: str, **kw: object) -> str:
    return (await commands.handle(msg(text, **kw))).text  # type: ignore[arg-type]


def test_parse_command_spaces_case_botname_and_unicode() -> None:
    assert parse_command("  /Memory   add   likes  tea ") == ("memory", ["add", "likes", "tea"])
    assert parse_command("/memory@chatterd_bot show") == ("memory", ["show"])
    assert parse_command("/memory add 我喜欢 绿茶\tand\u3000jasmine") == (
        "memory",
        ["add", "我喜欢", "绿茶", "and", "jasmine"],
    )


async def test_unknown_command_and_usage_lines(commands: Commands) -> None:
    assert await say(commands, "/frobnicate now") == (
        "Unknown command /frobnicate. Send /help to see what I can do."
    )
    assert await say(commands, "/memory add") == "Usage: /memory add <text>"
    assert await say(commands, "/memory add    ") == "Usage: /memory add <text>"
    assert (await say(commands, "/memory forget")).startswith("Usage: /memory forget <n>")
    assert (await say(commands, "/memory forget two")).startswith("Usage: /memory forget <n>")
    assert (await say(commands, "/memory forget 0")).startswith("Usage: /memory forget <n>")
    assert (await say(commands, "/context nonsense")).startswith("Usage: /context")


async def test_memory_add_show_forget_clear_with_confirm(commands: Commands, rig: Rig) -> None:
    assert await say(commands, "/memory") == "I don't remember anything about you yet."
    assert (
        await say(commands, "/memory   add   I like  green tea 🍵") == "Got it, I'll remember that."
    )
    assert await say(commands, "/memory add 我住在上海") == "Got it, I'll remember that."
    assert await say(commands, "/memory add 我住在上海") == "I already remember that."
    shown = await say(commands, "/memory show")
    assert shown.splitlines()[0] == "What I remember about you:"
    items = shown.splitlines()[1:]
    assert items == ["1. 我住在上海", "2. I like green tea 🍵"]  # newest first
    assert await say(commands, "/memory forget 3") == "There is no item 3; there are 2 item(s)."
    first = items[0].split(". ", 1)[1]
    assert await say(commands, "/memory forget 1") == f"Forgotten: {first}"
    assert len(await rig.storage.list_memories("telegram", "1")) == 1

    ask = await say(commands, "/memory clear")
    assert ask.endswith("send: /memory clear confirm")
    assert len(await rig.storage.list_memories("telegram", "1")) == 1  # not yet
    assert await say(commands, "/memory clear CONFIRM") == "Done: forgot 1 item(s)."
    assert await rig.storage.list_memories("telegram", "1") == []


async def test_non_admin_cannot_touch_someone_elses_memory(commands: Commands, rig: Rig) -> None:
    await rig.storage.add_memory("telegram", "2", "Bob's secret", "telegram:2")
    refusal = "Only admins can manage someone else's memory."
    for text in (
        "/memory show telegram:2",
        "/memory add telegram:2 hi",
        "/memory clear telegram:2 confirm",
    ):
        assert await say(commands, text, group=True, chat="-1") == refusal
    assert await say(commands, "/memory forget 1", reply_to_sender_id="2") == refusal
    assert [m.content for m in await rig.storage.list_memories("telegram", "2")] == ["Bob's secret"]
    # Naming yourself is just your own memory.
    assert await say(commands, "/memory add telegram:1 I am Alice") == "Got it, I'll remember that."


async def test_admin_targets_by_platform_id_name_and_reply(rig: Rig) -> None:
    group = {"chat": "-7", "group": True}
    admin = {"sender": ADMIN_ID, "name": "Root", **group}
    # Bob speaks in the group (untriggered: stored as context, so his name is known).
    assert await rig.answer(msg("hello all", sender="2", name="Bob", mid="1", **group)) is None

    reply = await rig.answer(msg("/memory add @bob plays the tuba", **admin))
    assert reply == Reply("Saved for @Bob.")
    reply = await rig.answer(msg("/memory add telegram:2 lives in Oslo", **admin))
    assert reply == Reply("Saved for telegram:2.")
    reply = await rig.answer(msg("/memory add likes jazz", reply_to_sender_id="2", **admin))
    assert reply == Reply("Saved for telegram:2.")
    bobs = sorted(m.content for m in await rig.storage.list_memories("telegram", "2"))
    assert bobs == ["likes jazz", "lives in Oslo", "plays the tuba"]
    assert await rig.storage.list_memories("telegram", ADMIN_ID) == []

    shown = await rig.answer(msg("/memory show @Bob", **admin))
    assert shown is not None and shown.private and shown.text.startswith("Memories of @Bob:")
    unknown = await rig.answer(msg("/memory show @Carol", **admin))
    assert unknown == Reply("I don't know anyone called @Carol in this chat.")
    ask = await rig.answer(msg("/memory clear telegram:2", **admin))
    assert ask is not None and ask.text.endswith("send: /memory clear telegram:2 confirm")
    done = await rig.answer(msg("/memory clear telegram:2 confirm", **admin))
    assert done == Reply("Done: forgot 3 item(s).")
    assert rig.fake.total_requests == 0  # commands never reach the model


async def test_two_users_in_one_group_see_only_their_own(commands: Commands) -> None:
    alice = {"chat": "-3", "group": True}
    bob = {"chat": "-3", "group": True, "sender": "2", "name": "Bob"}
    assert await say(commands, "/memory add Alice fact", **alice) == "Got it, I'll remember that."
    assert await say(commands, "/memory add Bob fact", **bob) == "Got it, I'll remember that."
    reply = await commands.handle(msg("/memory", **alice))
    assert reply == Reply("What I remember about you:\n1. Alice fact", private=True)
    reply = await commands.handle(msg("/memory show", **bob))
    assert reply == Reply("What I remember about you:\n1. Bob fact", private=True)
    assert await say(commands, "/memory clear confirm", **bob) == "Done: forgot 1 item(s)."
    assert (await commands.handle(msg("/memory", **alice))).text.endswith("1. Alice fact")


async def test_memory_show_in_private_is_not_marked_private(commands: Commands) -> None:
    assert await commands.handle(msg("/memory")) == Reply(
        "I don't remember anything about you yet."
    )


async def test_reset_private_keeps_memories(rig: Rig) -> None:
    await rig.storage.add_memory("telegram", "1", "keep me", "telegram:1")
    assert await rig.answer(msg("hi", mid="1")) == Reply("echo: [Alice]: hi")
    reply = await rig.answer(msg("/reset"))
    assert reply == Reply("Done: cleared our chat history (2 messages). Memories are kept.")
    assert await rig.storage.recent_turns("telegram", "1", 10) == []
    assert [m.content for m in await rig.storage.list_memories("telegram", "1")] == ["keep me"]


async def test_reset_in_group_needs_an_admin(rig: Rig) -> None:
    group = {"chat": "-4", "group": True}
    await rig.answer(msg("chatter", sender="2", name="Bob", mid="1", **group))
    refused = await rig.commands.handle(msg("/reset", **group))
    assert refused.text.startswith("Only an admin can reset a group's history.")
    assert len(await rig.storage.recent_turns("telegram", "-4", 10)) == 1
    allowed = await rig.commands.handle(msg("/reset", sender=ADMIN_ID, **group))
    assert (
        allowed.text == "Done: cleared this group's chat history (1 messages). Memories are kept."
    )
    assert await rig.storage.recent_turns("telegram", "-4", 10) == []


async def test_help_lists_commands_and_admin_extras(commands: Commands) -> None:
    """The daemon's commands: everyone sees theirs, admins also `/bot` (chat settings)."""
    text = await say(commands, "/help")
    admin = await say(commands, "/help", sender=ADMIN_ID)
    assert "bot" in commands.names
    for name in commands.names:
        assert f"/{name}" in admin
        assert (f"/{name}" in text) is (name not in ("bot", "schedule", "digest"))  # admins' only
    assert "Admin:" not in text and "Admin:" in admin
    assert await say(commands, "/start") == text


async def test_context_reports_after_a_turn_and_guards_other_chats(rig: Rig) -> None:
    assert (await rig.answer(msg("/context"))) == Reply(
        "No answered turn in that chat since I started, so nothing to report yet."
    )
    await rig.answer(msg("hello", mid="1"))
    report = await rig.answer(msg("/context"))
    assert report is not None and report.text.startswith("Context of the last turn:")
    assert "History: 0 turn(s) kept" in report.text

    other = msg("/context telegram:1", chat="-2", sender="3", group=True)
    assert await rig.answer(other) == Reply("Only admins can look at another chat's context.")
    admin = msg("/context telegram:1", chat="-2", sender=ADMIN_ID, group=True)
    seen = await rig.answer(admin)
    assert seen is not None and seen.private and seen.text == report.text


async def test_memory_add_text_starting_with_a_url_is_own_memory(commands: Commands) -> None:
    assert await say(commands, "/memory add http://example.org is my blog") == (
        "Got it, I'll remember that."
    )


async def test_memory_add_at_the_cap_is_refused_like_the_tool_marker(
    commands: Commands, rig: Rig
) -> None:
    full = [NewMemory(f"fact {n}", "telegram:1") for n in range(MAX_PER_USER)]
    assert len(await rig.storage.add_memories("telegram", "1", full)) == MAX_PER_USER
    refusal = await say(commands, "/memory add one more fact")
    assert refusal == (
        "Not saved: 200 memories is the limit for one person. "
        "Remove some first with /memory forget <n>."
    )
    sender = ToolContext("telegram", "1", "1", "Alice", memory=rig.storage)
    observation = await remember_tool().handler("one more fact", sender)
    assert observation.text == refusal and observation.ok is False
    assert len(await rig.storage.list_memories("telegram", "1")) == MAX_PER_USER
    # The cap counts per person, and an admin's /memory add for someone follows it too.
    admin = {"sender": ADMIN_ID, "name": "Root"}
    assert await say(commands, "/memory add telegram:1 also this", **admin) == refusal
    assert await say(commands, "/memory add mine", **admin) == "Got it, I'll remember that."


async def test_memory_add_too_long_is_refused_like_the_tool_marker(
    commands: Commands, rig: Rig
) -> None:
    long_fact = " ".join(["word"] * 120)  # 599 characters
    refusal = await say(commands, f"/memory add {long_fact}")
    assert refusal == "Not saved: 599 characters is over the limit of 500. Keep memories short."
    sender = ToolContext("telegram", "1", "1", "Alice", memory=rig.storage)
    observation = await remember_tool().handler(long_fact, sender)
    assert observation.text == refusal and observation.ok is False
    assert await rig.storage.list_memories("telegram", "1") == []
