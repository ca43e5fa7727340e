"""Is this person an admin here: one decision (core/admins.py), and every surface asks it.

Each test puts a decision of its own where the composition root builds the one it hands
out (bot/wiring/gate.py's `admins_of`), with `[bot] admins` left empty: a person is an
admin in one group and their own private chat, and nowhere else, as a group's own admins
would be. A surface that kept a list of its own, or asked without the chat, would treat
them the same in both groups and fail here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.commands.usage import USAGE_HELP
from core.admins import Admins, Someone
from core.jobs.asking import AskRules
from core.tools.mcp.config import McpConfig
from core.tools.registry import ToolContext
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import Rig, build_rig, msg

HERE, ELSEWHERE = "-100", "-200"  # the group where "42" is an admin, and one where not
ADMIN_HERE = "42"


class OneGroupsAdmin(Admins):
    """Sender 42 is an admin in group -100 and in their own private chat, nowhere else."""

    def here(self, who: Someone) -> bool:
        return who.sender_key == f"telegram:{ADMIN_HERE}" and who.chat_id in (HERE, ADMIN_HERE)


@pytest.fixture
async def rig(
    storage: SqlStorage, tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Rig]:
    """The daemon's turn path with no configured admins and OneGroupsAdmin as the decision;
    `fake` (the conftest's) serves the knowledge base's embeddings."""
    monkeypatch.setattr("bot.wiring.app.admins_of", lambda settings, *roles: OneGroupsAdmin())
    knowledge = {"embeddings": "openai", "base_url": fake.base_url, "model": "embed-test"}
    async with build_rig(
        storage,
        tmp_path,
        admins=frozenset(),
        knowledge=knowledge,
        access={"private": "off"},
        limits={"user_tokens_per_day": 1},
    ) as built:
        yield built


async def said(rig: Rig, text: str, chat: str, sender: str = ADMIN_HERE) -> str | None:
    group = chat.startswith("-")
    reply = await rig.answer(msg(text, chat=chat, sender=sender, name="Op", group=group))
    return reply.text if reply is not None else None


async def test_every_command_asks_the_one_decision_for_this_chat(rig: Rig) -> None:
    answers = {
        chat: {
            text: await said(rig, text, chat)
            for text in (
                "/help",
                "/usage group",
                "/jobs",
                "/remind list",
                "/schedule",
                "/bot status",
                "/kb remove 999",
                "/reset",
            )
        }
        for chat in (HERE, ELSEWHERE)
    }
    admin, member = answers[HERE], answers[ELSEWHERE]
    assert "Admin:" in (admin["/help"] or "") and "Admin:" not in (member["/help"] or "")
    assert (member["/usage group"] or "").startswith("Only admins")
    assert not (admin["/usage group"] or "Only").startswith(("Only", USAGE_HELP))
    assert (admin["/jobs"], member["/jobs"]) == ("No jobs here.", "You have no jobs here.")
    assert (admin["/remind list"], member["/remind list"]) == (
        "No reminders here.",
        "You have no reminders in this chat.",
    )
    assert (member["/schedule"] or "").startswith("Only admins can schedule")
    assert not (admin["/schedule"] or "").startswith("Only admins")
    assert member["/bot status"] == "Only admins can use /bot."
    assert (admin["/bot status"] or "").startswith("Here: telegram:-100")
    assert (member["/kb remove 999"] or "").startswith("Only admins can remove")
    assert admin["/kb remove 999"] == "There is no document #999 in this chat's knowledge base."
    assert (member["/reset"] or "").startswith("Only an admin can reset")
    assert (admin["/reset"] or "").startswith("Done: cleared this group's chat history")


async def test_the_gate_serves_and_exempts_whom_the_decision_names(rig: Rig) -> None:
    """`[access] private = "off"` still serves an admin, and the daily quota (one token)
    spares them; the same person in another group is a member there."""
    assert await said(rig, "hello", ADMIN_HERE) is not None
    assert await said(rig, "hello", "43", sender="43") is None  # private chats are off
    asked = len(rig.fake.requests)
    for _ in range(2):  # far past the allowance: still answered by the model
        assert await said(rig, "bot, hello", HERE) is not None
    assert len(rig.fake.requests) == asked + 2
    refused = await said(rig, "bot, hello", ELSEWHERE)
    assert refused is not None and "allowance" in refused
    assert len(rig.fake.requests) == asked + 2  # the member's message never reached it


def context(chat: str, sender: str = ADMIN_HERE) -> ToolContext:
    return ToolContext("telegram", chat, sender, "Op")


def test_the_tools_and_the_job_desks_ask_the_one_decision_for_this_chat() -> None:
    from core.tools.mcp.tools import McpTools  # the MCP SDK, as the daemon loads it

    decision = OneGroupsAdmin()
    tools = McpTools(McpConfig(), decision)
    assert tools.sender(context(HERE)).admin and not tools.sender(context(ELSEWHERE)).admin
    assert tools.sender(ToolContext("console", "c", "me", "Op")).admin  # the operator
    rules = AskRules(allow="admins", admins=decision)  # `[images] allow`, `spawn_allow`
    assert rules.allows(context(HERE)) and not rules.allows(context(ELSEWHERE))
