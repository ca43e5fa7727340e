"""The seed documents' public shapes, tested from the documents' own examples.

The seeds are the five documents (in Chinese) chatterd's context engine was specified
from; their public shapes are the contract of its API. Seed 000/001 give nanobot's
`ContextBuilder` (the system prompt's parts in order, `build_messages` as
`[system, *history, user]`, the tool-result and assistant-message shapes), seed 004 gives
team9's chunk tags. Every example the seeds show is written out literally, with the section
it comes from, in tests/context/seed_examples.py: the seeds stay the spec a reader checks those rows
against, and the suite needs nothing outside the repository. Each example is checked on its
own, so a rework cannot quietly lose one; a new seed example needs a new row there.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.context import Chunk, ContextBuilder, XmlChunkRenderer
from core.context.chunk_render import TAG_ROLES
from core.text.tokens import get_counter
from core.workspace.files import BOOTSTRAP_FILES, ensure_workspace
from core.workspace.skills import SkillsLoader
from tests.context.seed_examples import (
    ATTR,
    SEED_000_PROMPT_STEPS,
    SEED_001_BOOTSTRAP_FILES,
    SEED_001_LAYERS,
    SEED_001_TOOL_MESSAGE,
    SEED_004,
    SEED_BUILD_MESSAGES_CALLS,
    SEED_SIGNATURES,
    TagExample,
)

CLOCK = datetime(2026, 2, 10, 1, 30, tzinfo=UTC)
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@dataclass(frozen=True)
class Spec:
    """How a caller states a seed example as a chunk (its type comes from the seed)."""

    role: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    subtype: str | None = None


# Every example of seed 004, by its label (the comment above it, else its tag).
CHUNKS: dict[str, Spec] = {
    "system_context": Spec(metadata={"priority": 1000}),
    "role: user": Spec(role="user"),
    "role: assistant": Spec(role="assistant"),
    "role: assistant, action: clarification": Spec(
        role="assistant", metadata={"action": "clarification"}
    ),
    "Tool Call": Spec(
        metadata={
            "action": "tool_call",
            "tool": "read_file",
            "call_id": "call_123",
            "status": "pending",
        }
    ),
    "Skill Call": Spec(
        metadata={
            "action": "skill_call",
            "skill": "code_review",
            "call_id": "call_456",
            "status": "pending",
        }
    ),
    "Spawn SubAgent": Spec(
        metadata={
            "action": "spawn_subagent",
            "subagent_id": "agent_123",
            "agent_type": "researcher",
        }
    ),
    "Message to SubAgent": Spec(
        metadata={"action": "message_to_subagent", "subagent_id": "agent_123"}
    ),
    "SubAgent Result": Spec(
        metadata={"action": "subagent_result", "subagent_id": "agent_123", "success": True}
    ),
    "Parent Agent Message": Spec(
        metadata={"action": "parent_agent_message", "parent_agent_id": "agent_000"}
    ),
    "Tool Result": Spec(
        metadata={
            "action": "tool_result",
            "tool": "read_file",
            "call_id": "call_123",
            "success": True,
        }
    ),
    "Tool Error": Spec(
        metadata={
            "action": "tool_result",
            "tool": "read_file",
            "call_id": "call_123",
            "success": False,
        }
    ),
    "Skill Result": Spec(
        metadata={
            "action": "skill_result",
            "skill": "code_review",
            "call_id": "call_456",
            "success": True,
        }
    ),
    "Compacted Progress Summary": Spec(metadata={"compacted_at": "1703...", "original_count": 15}),
    "TODO Update": Spec(metadata={"action": "todo_set"}),
    "Thinking": Spec(subtype="THINKING"),
    "User Intervention": Spec(subtype="USER"),
    "Task Completed": Spec(metadata={"action": "task_completed"}),
    "Task Abandoned": Spec(metadata={"action": "task_abandoned", "reason": "无法完成"}),
    "Task Terminated": Spec(metadata={"action": "task_terminated", "terminated_by": "user"}),
}


def opening(rendered: str) -> tuple[str, list[tuple[str, str]]]:
    m = re.match(r"<([a-z_]+)((?:\s+[A-Za-z_][\w.-]*=\"[^\"]*\")*)>", rendered)
    assert m is not None, rendered
    return m.group(1), ATTR.findall(m.group(2))


def test_seed_004_has_every_tag_and_every_example_has_a_case() -> None:
    labels = [e.label for e in SEED_004]
    assert len(labels) == len(set(labels)) == 20
    assert set(labels) == set(CHUNKS)  # a new seed example needs its case here
    assert {e.tag for e in SEED_004} == set(TAG_ROLES)  # and every tag we render is in it


@pytest.mark.parametrize("example", SEED_004, ids=lambda e: e.label)
def test_seed_004_example_renders_exactly(example: TagExample) -> None:
    spec = CHUNKS[example.label]
    chunk_id = dict(example.attrs)["id"]  # the seed's "chunk_xxx", kept as the chunk's id
    chunk = Chunk(
        chunk_id,
        example.type,
        example.body,
        role=spec.role,
        metadata=spec.metadata,
        subtype=spec.subtype,
    )
    renderer = XmlChunkRenderer()
    rendered = renderer.render(chunk)
    assert opening(rendered) == (example.tag, example.attrs)
    assert rendered.endswith(f"</{example.tag}>")
    body = rendered[rendered.index(">") + 1 : -len(f"</{example.tag}>")]
    assert body.strip() == example.body.replace("<", "&lt;")
    assert renderer.get_role(chunk) == (spec.role or TAG_ROLES[example.tag])


# -- seeds 000 and 001: nanobot's ContextBuilder ------------------------------------------


@pytest.fixture
def builder(tmp_path: Path) -> ContextBuilder:
    """A workspace with every part seed 000 lists: bootstrap files, long-term memory and
    today's note, an always-on skill and one only summarised."""
    root = tmp_path / "workspace"
    ensure_workspace(root, "nanobot")
    (root / "USER.md").write_text("The user prefers short answers.")
    (root / "memory" / "MEMORY.md").write_text("Long-term: the user codes in Python.")
    (root / "memory" / f"{CLOCK:%Y-%m-%d}.md").write_text("Today: reviewing a PR.")
    for name, always in (("tidy", "true"), ("weather", "false")):
        folder = root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {name} skill\nalways: {always}\n---\nHow to {name}.\n"
        )
    return ContextBuilder(
        root,
        token_counter=get_counter("o200k_base"),
        clock=lambda: CLOCK,
        tool_guide="You can call read_file.",
        skills=SkillsLoader(root / "skills", which=lambda _b: None, environ={}),
    )


def headers(prompt: str) -> list[str]:
    return [line[2:] for line in prompt.splitlines() if line.startswith("# ")]


def test_seed_000_system_prompt_parts_in_order(builder: ContextBuilder) -> None:
    """Seed 000 §3.3: identity, bootstrap files, memory context, always skills, summary."""
    ours = {  # each seed step and the sections it is in chatterd's prompt
        "_get_identity": ["Identity", "Current time", "Tool guide"],
        "_load_bootstrap_files": list(BOOTSTRAP_FILES),
        "memory.get_memory_context": ["Workspace memory", f"Notes for {CLOCK:%Y-%m-%d}"],
        "skills.load_skills_for_context": ["Skill tidy"],
        "skills.build_skills_summary": ["Skills"],
    }
    assert list(ours) == SEED_000_PROMPT_STEPS
    prompt = builder.build_system_prompt()
    assert headers(prompt) == [name for step in SEED_000_PROMPT_STEPS for name in ours[step]]
    identity = prompt.split("# AGENTS.md")[0]
    assert "2026-02-10 01:30" in identity and "Python" in identity  # time, runtime
    assert str(builder.workspace.root) in identity  # and the workspace


def test_seed_001_bootstrap_files_and_layers(builder: ContextBuilder) -> None:
    """Seed 001 §3.3 names the bootstrap files; §2.2 stacks identity, bootstrap, memory,
    skills, then history and the current message."""
    assert list(BOOTSTRAP_FILES) == SEED_001_BOOTSTRAP_FILES
    marks = {  # where each of the system prompt's layers starts in chatterd's prompt
        "Identity": "# Identity",
        "Bootstrap Files": "# AGENTS.md",
        "Memory": "# Workspace memory",
        "Skills": "# Skill",
    }
    assert SEED_001_LAYERS == [*marks, "History", "Current Message"]
    prompt = builder.build_system_prompt()
    first = [prompt.index(marks[layer]) for layer in SEED_001_LAYERS[:4]]
    assert first == sorted(first)
    messages = builder.build_messages([{"role": "user", "content": "earlier"}], "now")
    assert messages[0] == {"role": "system", "content": prompt}
    assert [m["content"] for m in messages[1:]] == ["earlier", "now"]  # history, then current


@pytest.mark.parametrize("name", list(SEED_SIGNATURES))
def test_seed_signatures_are_ours(name: str) -> None:
    params = SEED_SIGNATURES[name]
    ours = inspect.signature(getattr(ContextBuilder, name)).parameters.values()
    positional = [p.name for p in ours if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [n for n in positional if n != "self"][: len(params)] == params
    extra = [p for p in ours if p.name not in params and p.name != "self"]
    assert all(p.default is not p.empty for p in extra)  # nothing more required


@pytest.mark.parametrize("where", list(SEED_BUILD_MESSAGES_CALLS))
def test_seed_build_messages_examples_give_system_history_user(
    builder: ContextBuilder, tmp_path: Path, where: str
) -> None:
    """Seed 000 §4 and 001 §5: `[system, *history, user]`, images in the user message as
    base64 data URLs, nothing between the history and the current message."""
    call = dict(SEED_BUILD_MESSAGES_CALLS[where])
    picture = tmp_path / "image.png"
    picture.write_bytes(PNG)
    media = [picture for _ in call.pop("media", None) or []]
    messages = builder.build_messages(**call, media=media or None)
    history = call["history"]
    assert [m["role"] for m in messages] == ["system", *[h["role"] for h in history], "user"]
    assert messages[1 : 1 + len(history)] == history
    system = messages[0]["content"]
    assert system == builder.build_system_prompt() + (
        f"\n\n# Session\nChannel: {call['channel']}\nChat ID: {call['chat_id']}"
        if call.get("channel")
        else ""
    )
    current = messages[-1]["content"]
    if media:
        assert [p["type"] for p in current] == ["image_url", "text"]
        assert current[0]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
        assert current[-1]["text"] == call["current_message"]
    else:
        assert current == call["current_message"]


def test_seed_001_tool_result_and_assistant_message_shapes(builder: ContextBuilder) -> None:
    """Seed 001 §3.6's tool message, exactly; §3.7/§5.3's assistant message with tool
    calls (passed as `tool_call_dicts`, as the example does) or content only."""
    expected = SEED_001_TOOL_MESSAGE
    messages = builder.build_messages([], "hi")
    out = builder.add_tool_result(
        messages, expected["tool_call_id"], expected["name"], expected["content"]
    )
    assert out is messages and messages[-1] == expected
    assert list(messages[-1]) == list(expected)
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    builder.add_assistant_message(messages, None, tool_call_dicts=[call])
    assert messages[-1] == {"role": "assistant", "content": None, "tool_calls": [call]}
    builder.add_assistant_message(messages, "done", [call])
    assert messages[-1]["tool_calls"] == [call]
    builder.add_assistant_message(messages, "plain", None)
    assert messages[-1] == {"role": "assistant", "content": "plain"}
