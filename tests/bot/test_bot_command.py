"""`/bot ...` through bot.commands.table.Commands over real storage: every subcommand's answer
and what it stored. The daemon-level behaviour (silence, restarts, prompts) is in
tests/turn/test_access_e2e.py."""

from __future__ import annotations

from typing import Any

import pytest

from bot.commands.admin import BotCommand
from bot.commands.table import Commands
from core.admins import Admins
from core.messages import ChatType, InboundMessage
from core.turn.access import AccessRules
from memory.chats.settings import PERSONA_MAX_CHARS, WAKE_WORDS_MAX
from memory.chats.settings_cache import CachedChatSettings
from memory.turns.store import SqlStorage

ADMIN_ID = "1"
GROUP_ID = "group:7"


def said(text: str, *, sender: str = ADMIN_ID, group: bool = True) -> InboundMessage:
    return InboundMessage(
        platform="qq",
        chat_id=GROUP_ID if group else f"private:{sender}",
        chat_type=ChatType.GROUP if group else ChatType.PRIVATE,
        sender_id=sender,
        sender_name="op",
        text=text,
    )


@pytest.fixture
def commands(storage: SqlStorage) -> Commands:
    rules = AccessRules(
        groups="allowlist",
        admins=Admins(frozenset({f"qq:{ADMIN_ID}"})),
        blocked_users=frozenset({"qq:9"}),
    )
    control = BotCommand(
        CachedChatSettings(storage.chat_settings), rules, ("chatterd", "mochi"), 20
    )
    return Commands(
        store=storage,
        admins=rules.admins,
        bot_name="chatterd",
        context_report=lambda platform, chat_id: None,
        bot_control=control,
    )


async def answer(commands: Commands, text: str, **where: Any) -> str:
    return (await commands.handle(said(text, **where))).text


async def test_non_admins_are_refused_and_nothing_changes(
    commands: Commands, storage: SqlStorage
) -> None:
    for text in ("/bot", "/bot status", "/bot off", "/bot allow", "/bot persona x"):
        assert await answer(commands, text, sender="2") == "Only admins can use /bot."
    assert await storage.chat_settings.listing() == []


async def test_bare_bot_and_unknown_subcommands_explain_themselves(commands: Commands) -> None:
    usage = await answer(commands, "/bot")
    assert usage.startswith("Usage (admins): /bot status")
    for form in ("/bot on", "/bot allow", "/bot persona <text>", "/bot wake <word>"):
        assert form in usage
    assert "/bot reset-settings" in usage
    assert await answer(commands, "/bot dance") == usage
    assert await answer(commands, "/bot@chatterd_bot") == usage  # Telegram's addressed form


async def test_on_off_allow_deny_store_and_say_what_they_did(
    commands: Commands, storage: SqlStorage
) -> None:
    on = await answer(commands, "/bot on")
    assert on == (
        "I'm on, but this group is not served (not in [access] allowed_groups): "
        "send /bot allow to open it."
    )
    off = await answer(commands, "/bot off")
    assert off.startswith("I'm off in this group: I won't answer or keep messages here")
    allowed = await answer(commands, "/bot allow")
    assert allowed == "This group is allowed, but I'm switched off here: send /bot on."
    assert await answer(commands, "/BOT ON") == "I'm on in this group again."
    denied = await answer(commands, "/bot deny")
    assert denied.startswith("This group is denied: I ignore it from now on")
    stored = await storage.chat_settings.get("qq", GROUP_ID)
    assert (stored.enabled, stored.allowed, stored.updated_by) == (True, False, "qq:1")


@pytest.mark.parametrize("sub", ["on", "off", "allow", "deny", "wake x"])
async def test_group_only_subcommands_say_so_in_private(
    commands: Commands, storage: SqlStorage, sub: str
) -> None:
    reply = await answer(commands, f"/bot {sub}", group=False)
    assert reply.endswith("works in a group. Private chats follow [access] private in the config.")
    assert await storage.chat_settings.listing() == []


async def test_persona_set_shown_cleared_and_checked(
    commands: Commands, storage: SqlStorage
) -> None:
    assert (await answer(commands, "/bot persona")).startswith("This chat's persona: none.")
    text = "Be  gentle.\nAnswer in haiku."
    done = await answer(commands, f"/bot persona   {text}  ")
    assert done == "Done: this persona applies to my answers in this chat only."
    assert (await storage.chat_settings.get("qq", GROUP_ID)).persona == text  # spacing kept
    assert (await answer(commands, "/bot persona")).startswith(f'This chat\'s persona: "{text}".')
    too_long = "x" * (PERSONA_MAX_CHARS + 1)
    refused = await answer(commands, f"/bot persona {too_long}")
    assert refused == (
        f"Not changed: the persona is {PERSONA_MAX_CHARS + 1} characters; "
        f"at most {PERSONA_MAX_CHARS} fit."
    )
    assert (await storage.chat_settings.get("qq", GROUP_ID)).persona == text
    assert await answer(commands, "/bot persona CLEAR") == (
        "Done: this chat has no persona of its own now."
    )
    assert (await storage.chat_settings.get("qq", GROUP_ID)).persona == ""
    private = await answer(commands, "/bot persona Formal, please.", group=False)
    assert private.startswith("Done")  # a private chat may have one too
    assert (await storage.chat_settings.get("qq", "private:1")).persona == "Formal, please."
    assert (await storage.chat_settings.get("qq", GROUP_ID)).persona == ""


async def test_wake_words_added_listed_removed_and_limited(
    commands: Commands, storage: SqlStorage
) -> None:
    assert await answer(commands, "/bot wake") == (
        "Wake words: chatterd, mochi (config); this group's own: none."
    )
    assert await answer(commands, "/bot wake Mochi") == (
        "Mochi is already a wake word everywhere (the config)."
    )
    assert (await answer(commands, "/bot wake hey  bot")).startswith("Added hey bot.")
    assert (await answer(commands, "/bot wake 小助手")).endswith(
        "this group's own: hey bot, 小助手."
    )
    assert (await answer(commands, "/bot wake -HEY BOT")).startswith("Removed HEY BOT.")
    assert await answer(commands, "/bot wake -nothing") == (
        "Not changed: nothing is not one of this group's wake words."
    )
    assert await answer(commands, "/bot wake -") == "Not changed: a wake word cannot be empty."
    for n in range(WAKE_WORDS_MAX - 1):
        await answer(commands, f"/bot wake w{n}")
    assert await answer(commands, "/bot wake one-too-many") == (
        f"Not changed: at most {WAKE_WORDS_MAX} wake words per chat."
    )
    stored = await storage.chat_settings.get("qq", GROUP_ID)
    assert len(stored.wake_words) == WAKE_WORDS_MAX and stored.wake_words[0] == "小助手"


async def test_reset_settings_keeps_on_off_and_allow(
    commands: Commands, storage: SqlStorage
) -> None:
    await answer(commands, "/bot off")
    await answer(commands, "/bot allow")
    await answer(commands, "/bot persona Pirate.")
    await answer(commands, "/bot wake pancake")
    reset = await answer(commands, "/bot reset-settings")
    assert reset == "Done: this chat's persona and wake words are back to the defaults."
    stored = await storage.chat_settings.get("qq", GROUP_ID)
    assert (stored.persona, stored.wake_words) == ("", ())
    assert (stored.enabled, stored.allowed) == (False, True)


async def test_status_says_what_applies_here(commands: Commands) -> None:
    fresh = await answer(commands, "/bot status")
    assert fresh.splitlines() == [
        "Here: qq:group:7 (group chat).",
        "Access: not allowed (not in [access] allowed_groups).",
        "Bot: on; ignoring non-admins here.",
        "Wake words: chatterd, mochi (config); this group's own: none.",
        "Chime-in: off ([groups] chime_in): I speak here only when called.",
        "Blocked users: 1 ([access]).",
        "Persona: none.",
        "Time zone: UTC ([bot] timezone).",
        "Rate limit: 20 messages per user per minute (admins exempt).",
    ]
    await answer(commands, "/bot allow")
    await answer(commands, "/bot persona Pirate.")
    lines = (await answer(commands, "/bot status")).splitlines()
    assert "Access: allowed (allowed by /bot allow)." in lines
    assert "Bot: on; answering here." in lines
    assert 'Persona: "Pirate.".' in lines
    assert lines[-1].startswith("Last changed by qq:1 at ")
    private = (await answer(commands, "/bot status", group=False)).splitlines()
    assert private[:2] == [
        "Here: qq:private:1 (private chat).",
        'Private chats: [access] private = "all".',
    ]


async def test_admin_help_lists_bot(commands: Commands) -> None:
    help_text = await answer(commands, "/help", group=False)
    assert "/bot status|on|off|allow|deny" in help_text
    assert "bot" in commands.names
