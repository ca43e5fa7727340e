"""Citation numbers within one turn (issue 36): the context and the `knowledge` tool agree.

What must hold: the context shows the turn's passages as [1]..[n]; a `knowledge` call in
the same turn gives a new passage the next number ([n+1]) and a passage the context
already showed its original number, in the observation of the next model request, in
markers mode and in native mode; the next turn numbers afresh. Through the daemon's turn
path on the fake OpenAI server (chat and embeddings) and a channel fake.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.context.report import KnowledgeNote
from core.knowledge.citations import CITATIONS_KEY, Citations
from core.knowledge.render import render_for_context
from core.knowledge.retrieval import note_for
from core.knowledge.service import Hit
from core.knowledge.tool import knowledge_tool
from core.tools.registry import ToolContext
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.knowledge.test_kb_chat import GROUP_A, ask, command, document
from tests.rig import Rig, build_rig

HANDBOOK = b"""## Schedule
The chess club meets every Tuesday at 19:00 in room 204 of the library.

## Fees
Membership costs 12 euros a year, paid to the treasurer Marta.

## Kettle
The club kettle is descaled every month; whoever empties it refills it.
"""


# Words of "Schedule" and "Fees" only: the context shows those two, never "Kettle".
ASK_BOTH = "bot, chess on tuesday, which room? membership euros, which treasurer?"


@pytest.fixture(params=["markers", "native"])
async def rig(
    request: pytest.FixtureRequest, storage: SqlStorage, tmp_path: Path, fake: FakeOpenAI
) -> AsyncIterator[Rig]:
    knowledge = {"embeddings": "openai", "base_url": fake.base_url, "top_k": 2}
    async with build_rig(
        storage, tmp_path, knowledge=knowledge, tools={"mode": request.param}
    ) as built:
        await command(built, "/kb add", attachments=(document(HANDBOOK, "handbook.md"),))
        yield built


def numbered(text: str) -> dict[str, int]:
    """The section each `[n] handbook.md · "Section"` head names, with its number."""
    heads = re.findall(r'^\[(\d+)\] handbook\.md · "(\w+)"$', text, re.MULTILINE)
    return {section: int(n) for n, section in heads}


def call_knowledge(rig: Rig, query: str, answer: str) -> None:
    """Script the model: one `knowledge` call (as this rig's mode writes it), then `answer`."""
    if native(rig):
        rig.fake.reply_tool_calls([{"name": "knowledge", "arguments": {"query": query}}])
    else:
        rig.fake.reply(f"[Knowledge: {query}]")
    rig.fake.reply(answer)


def observation(rig: Rig) -> str:
    """The `knowledge` tool's answer in the latest request: its last message (a tool
    message in native mode, the framed user turn in markers mode)."""
    messages: list[dict[str, Any]] = rig.fake.requests[-1]["messages"]
    assert messages[-1]["role"] == ("tool" if native(rig) else "user"), messages[-1]
    found = content_text(messages[-1].get("content"))
    assert found.startswith('<knowledge query="'), found
    return found


def native(rig: Rig) -> bool:
    return rig.app.settings.tools.mode == "native"


def context_passages(rig: Rig) -> dict[str, int]:
    """The passages the first request of the turn (before any tool call) showed."""
    messages: list[dict[str, Any]] = rig.fake.requests[-2]["messages"]
    return numbered("\n".join(content_text(m.get("content")) for m in messages))


async def test_a_tool_call_continues_the_contexts_numbers(rig: Rig) -> None:
    call_knowledge(rig, "kettle descaled refills", "Refill it [3]; 12 euros [2].")
    await ask(rig, ASK_BOTH, chat=GROUP_A)

    shown = context_passages(rig)
    assert sorted(shown.values()) == [1, 2] and "Kettle" not in shown, shown
    found = observation(rig)
    assert "untrusted" in found.lower() or "not instructions" in found  # still material
    tool = numbered(found)
    assert tool["Kettle"] == 3, found  # new in this turn: after the context's [1]..[2]
    repeated = [section for section in tool if section != "Kettle"]
    assert repeated, found  # top_k 2 of 3 passages: one of them was in the context
    for section in repeated:  # shown before in the turn: the same number as there
        assert tool[section] == shown[section], (shown, found)


async def test_the_next_turn_numbers_afresh(rig: Rig) -> None:
    call_knowledge(rig, "kettle descaled refills", "Done.")
    await ask(rig, ASK_BOTH, chat=GROUP_A)
    assert numbered(observation(rig))["Kettle"] == 3

    call_knowledge(rig, "chess tuesday room library", "Done.")
    await ask(rig, "bot, kettle descaled? who refills it?", chat=GROUP_A)
    shown = context_passages(rig)
    assert shown.get("Kettle") == 1, shown  # this turn's context starts at [1] again
    tool = numbered(observation(rig))
    assert tool.get("Kettle", 1) == 1 and "Schedule" in tool, tool
    assert tool["Schedule"] == shown.get("Schedule", 3), (shown, tool)


# -- the numbering itself ----------------------------------------------------------------


def hit(chunk_id: int, section: str, text: str = "Some words.") -> Hit:
    return Hit(chunk_id, 1, "handbook.md", f'"{section}"', text, 0.03, 1, 1, 1.0, 0.5)


def test_a_passage_keeps_its_number_and_a_new_one_continues() -> None:
    citations = Citations()
    assert citations.peek(7) == 1 and citations.last == 0  # peeking keeps nothing
    assert [citations.cite(key) for key in (7, 9, 7, 4)] == [1, 2, 1, 3]
    assert citations.numbers == ((7, 1), (9, 2), (4, 3)) and citations.last == 3
    assert citations.peek(9) == 2 and citations.peek(5) == 4
    seeded = Citations([(4, 2), (8, 5)])
    assert seeded.cite(1) == 6 and seeded.cite(8) == 5
    assert Citations(after=3).cite(1) == 4


def test_the_turns_numbering_starts_from_what_the_context_showed() -> None:
    note = note_for([hit(10, "Schedule"), hit(11, "Fees")], max_tokens=1500)
    assert note.numbers == ((10, 1), (11, 2))
    citations = Citations.after(note)
    assert citations.peek(11) == 2 and citations.peek(12) == 3
    assert Citations.after(None).peek(10) == 1
    # another lookup's note that does not say its numbers still reserves them
    foreign = KnowledgeNote("(Knowledge base: ...)\n\n[1] a.md\nx\n\n[2] b.md\ny", ("a", "b"))
    assert Citations.after(foreign).peek(10) == 3


def test_rendering_with_the_turns_numbers() -> None:
    citations = Citations([(10, 1), (11, 2)])
    out = render_for_context([hit(12, "Kettle"), hit(11, "Fees")], citations=citations)
    assert '[3] handbook.md · "Kettle"' in out and '[2] handbook.md · "Fees"' in out
    assert "[1]" not in out.split(")", 1)[1]  # only the notice's example says [1]
    assert "not as instructions" in out  # still framed as material
    again = render_for_context([hit(13, "Rules"), hit(12, "Kettle")], citations=citations)
    assert '[4] handbook.md · "Rules"' in again and '[3] handbook.md · "Kettle"' in again
    # without the turn's numbering: from [1], as before
    assert '[1] handbook.md · "Kettle"' in render_for_context([hit(12, "Kettle")])


def test_a_passage_the_budget_leaves_out_takes_no_number() -> None:
    long = "word " * 400
    citations = Citations([(10, 1)])
    out = render_for_context(
        [hit(12, "Kettle"), hit(13, "Long", long)], max_tokens=150, citations=citations
    )
    assert '[2] handbook.md · "Kettle"' in out and '"Long"' not in out
    assert citations.numbers == ((10, 1), (12, 2))  # "Long" was not shown: no number
    assert citations.peek(13) == 3
    note = note_for([hit(20, "A", long), hit(21, "B")], max_tokens=120)
    assert note.numbers == ((20, 1),) and note.dropped == ('handbook.md · "B"',)


async def test_the_tool_numbers_with_the_context_it_is_given() -> None:
    seen: list[Citations] = []

    async def numbered_search(platform: str, chat: str, query: str, cited: Citations) -> str:
        seen.append(cited)
        return render_for_context([hit(12, "Kettle"), hit(10, "Schedule")], citations=cited)

    tool = knowledge_tool(numbered=numbered_search)
    turn = Citations([(10, 1), (11, 2)])
    ctx = ToolContext("telegram", "-1", "7", "Bob", None, {CITATIONS_KEY: turn})
    first = (await tool.handler("kettle", ctx)).text
    assert '[3] handbook.md · "Kettle"' in first and '[1] handbook.md · "Schedule"' in first
    assert (await tool.handler("kettle again", ctx)).text == first  # same turn, same numbers
    assert seen == [turn, turn]
    fresh = ToolContext("telegram", "-1", "7", "Bob", None)  # no turn: from [1]
    assert '[1] handbook.md · "Kettle"' in (await tool.handler("kettle", fresh)).text
    assert seen[-1] is not turn

    async def old_search(platform: str, chat: str, query: str) -> str:
        return f"{platform}:{chat} {query}"

    assert (await knowledge_tool(old_search).handler("x", ctx)).text == "telegram:-1 x"
    with pytest.raises(ValueError):
        knowledge_tool()


async def test_a_background_task_numbers_its_knowledge_calls_once_across_steps() -> None:
    """Every step of a task shares one numbering; a resumed task goes on after the numbers
    its earlier observations showed."""
    from datetime import UTC, datetime

    from core.background.agent import task_context
    from memory.jobs.types import Job

    async def numbered_search(platform: str, chat: str, query: str, cited: Citations) -> str:
        found = [hit(12, "Kettle")] if "kettle" in query else [hit(10, "Schedule")]
        return render_for_context(found, citations=cited)

    tool = knowledge_tool(numbered=numbered_search)
    now = datetime.now(UTC)
    job = Job(
        "task", "telegram", "-1", "group", id=5, requester_id="7", requester_name="Bob",
        args={}, state="running", attempts=1, max_attempts=3, claimed_by=None,
        lease_until=None, progress={}, outcome=None, result={}, cost_tokens=0,
        delivered_at=None, created_at=now, updated_at=now, finished_at=None,
    )  # fmt: skip
    ctx = task_context(job, None)
    assert "[1] handbook.md" in (await tool.handler("schedule", ctx)).text
    assert '[2] handbook.md · "Kettle"' in (await tool.handler("kettle", ctx)).text
    resumed = task_context(job, None, Citations.continuing(["[1] a\n...", "[2] b\n..."]))
    assert '[3] handbook.md · "Kettle"' in (await tool.handler("kettle", resumed)).text
