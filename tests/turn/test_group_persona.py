"""A persona per group through the real daemon (fake OneBot + fake model): a chat's own
SOUL.md / AGENTS.md in workspace/chats/<platform>:<chat_id>/ replace the workspace's for
that chat only, `/bot persona reset` removes the line an admin set, and `/context` names
which persona a turn used. What is asserted is what the fake model was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.context.system_prompt import persona_source
from core.workspace.files import Workspace
from memory.turns.store import SqlStorage
from tests.fakes.onebot_impl import FakeOneBot
from tests.fakes.openai_server import FakeOpenAI
from tests.turn.test_access_e2e import (
    FAKE_CHAT,  # noqa: F401 - the script conftest.py's `chat` fixture serves here too
    OTHER_GROUP,
    QQ_ADMIN,
    QQ_GROUP,
    QQ_SELF,
    at_bot,
    prompts,
    qq_daemon,
    qq_say,
    qq_settings,
    qq_text,
)

ADMIN: dict[str, Any] = {"user_id": QQ_ADMIN, "nickname": "op"}


def test_chat_files_replace_the_workspace_files_for_that_chat_only(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("calm")
    (tmp_path / "TOOLS.md").write_text("tools")
    own = tmp_path / "chats" / "qq:group:7"
    own.mkdir(parents=True)
    (own / "SOUL.md").write_text("a pirate")
    ws = Workspace(tmp_path)
    assert [f.content for f in ws.bootstrap_files(("qq", "group:7"))] == ["a pirate", "tools"]
    assert [f.content for f in ws.bootstrap_files(("qq", "group:8"))] == ["calm", "tools"]
    assert [f.content for f in ws.bootstrap_files()] == ["calm", "tools"]
    assert ws.chat_dir(("qq", "../x")) is None and ws.chat_dir(("qq", "a\\b")) is None


def test_persona_source_names_every_source() -> None:
    assert persona_source([], False) == "workspace"
    assert persona_source([], True) == "set by /bot persona"
    assert persona_source(["chats/qq:g/SOUL.md"], True) == (
        "chat file chats/qq:g/SOUL.md + set by /bot persona"
    )


async def test_chat_soul_file_is_that_groups_persona_and_context_names_it(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,  # noqa: F811
) -> None:
    settings = qq_settings(tmp_path, database_url, chat)
    own = tmp_path / "workspace" / "chats" / f"qq:group:{QQ_GROUP}"
    own.mkdir(parents=True)
    (own / "SOUL.md").write_text("You are a grumpy lighthouse keeper.")
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with qq_daemon(settings, impl) as link:
            await qq_say(link, impl, at_bot("hello?"))
            report = await qq_say(link, impl, qq_text("/context"))
            await qq_say(link, impl, at_bot("hello there?"), group_id=OTHER_GROUP)
            other = await qq_say(link, impl, qq_text("/context"), group_id=OTHER_GROUP)
    finally:
        await impl.close()
    here, elsewhere = prompts(chat.requests)
    assert "grumpy lighthouse keeper" in here
    assert "grumpy" not in elsewhere and "Friendly, direct and honest" in elsewhere
    assert "Friendly, direct and honest" not in here  # replaced, not added to
    assert f"Persona: chat file chats/qq:group:{QQ_GROUP}/SOUL.md." in report
    assert "Persona: workspace." in other


async def test_bot_persona_reset_removes_it_and_context_names_the_source(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,  # noqa: F811
) -> None:
    settings = qq_settings(tmp_path, database_url, chat)
    impl = FakeOneBot(self_id=QQ_SELF)
    try:
        async with qq_daemon(settings, impl) as link:
            await qq_say(link, impl, qq_text("/bot persona Speak like a sea shanty."), **ADMIN)
            shown = await qq_say(link, impl, qq_text("/bot persona"), **ADMIN)
            assert shown.startswith('This chat\'s persona: "Speak like a sea shanty."')
            await qq_say(link, impl, at_bot("sing?"))
            await qq_say(link, impl, at_bot("and here?"), group_id=OTHER_GROUP)
            report = await qq_say(link, impl, qq_text("/context"))
            done = await qq_say(link, impl, qq_text("/bot persona reset"), **ADMIN)
            assert done == "Done: this chat has no persona of its own now."
            await qq_say(link, impl, at_bot("again?"))
    finally:
        await impl.close()
    sung, elsewhere, after = prompts(chat.requests)
    assert "sea shanty" in sung
    assert "sea shanty" not in elsewhere and "sea shanty" not in after
    assert "Persona: set by /bot persona." in report
    assert (await storage.chat_settings.get("qq", f"group:{QQ_GROUP}")).persona == ""
