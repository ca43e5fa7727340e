"""The seed documents' public shapes, tested from the documents' own examples.

The seeds (../shared/seeds/, in Chinese) are the contract of the context engine's public
API: seed 000/001 give nanobot's `ContextBuilder` (the system prompt's parts in order,
`build_messages` as `[system, *history, user]`, the tool-result and assistant-message
shapes), seed 004 gives team9's chunk tags. Each test reads its seed file and checks
every example in it, so a rework cannot quietly lose one (the `role` attribute was lost
that way once). The seeds folder sits beside the repository; CI always has it, so a
missing folder fails loudly instead of skipping.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.context import Chunk, ChunkType, XmlChunkRenderer
from core.context.chunk_render import TAG_ROLES

SEEDS = Path(__file__).parents[1].parent / "shared" / "seeds"
CLOCK = datetime(2026, 2, 10, 1, 30, tzinfo=UTC)
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def seed(number: str) -> str:
    """The text of seed `number` ("000"); fails (never skips) when the folder is missing."""
    found = sorted(SEEDS.glob(f"{number}_*.txt"))
    if not found:
        pytest.fail(
            f"seed {number} not found in {SEEDS}: the seed documents must sit beside the "
            "repository as ../shared/seeds/ (CI has them there)",
            pytrace=False,
        )
    return found[0].read_text(encoding="utf-8")


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


# -- seed 004: every chunk tag example ----------------------------------------------------

_EXAMPLE = re.compile(
    r"(?:<!--\s*(?P<label>.*?)\s*-->\s*)?"
    r"<(?P<tag>[a-z_]+)(?P<attrs>(?:\s+[a-z_]+=\"[^\"]*\")*)>(?P<body>.*?)</(?P=tag)>",
    re.DOTALL,
)
_ATTR = re.compile(r'([a-z_]+)="([^"]*)"')


@dataclass(frozen=True)
class TagExample:
    """One XML example of seed 004: its chunk type (the section), label, tag, attributes."""

    type: ChunkType
    label: str
    tag: str
    attrs: list[tuple[str, str]]
    body: str


def tag_examples() -> list[TagExample]:
    text = seed("004")
    sections = re.split(r"^### ChunkType\.([A-Z_]+)\s*$", text, flags=re.MULTILINE)
    examples = []
    for name, part in zip(sections[1::2], sections[2::2], strict=True):
        for block in code_blocks(part, "xml"):
            for m in _EXAMPLE.finditer(block):
                examples.append(
                    TagExample(
                        ChunkType[name],
                        m.group("label") or m.group("tag"),
                        m.group("tag"),
                        _ATTR.findall(m.group("attrs")),
                        textwrap.dedent(m.group("body")).strip(),
                    )
                )
    return examples


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
    return m.group(1), _ATTR.findall(m.group(2))


def test_seed_004_has_every_tag_and_every_example_has_a_case() -> None:
    examples = tag_examples()
    labels = [e.label for e in examples]
    assert len(labels) == len(set(labels)) == 20
    assert set(labels) == set(CHUNKS)  # a new seed example needs its case here
    assert {e.tag for e in examples} == set(TAG_ROLES)  # and every tag we render is in it


@pytest.mark.parametrize("example", tag_examples(), ids=lambda e: e.label)
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
