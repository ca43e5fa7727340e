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

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from core.context import Chunk, ChunkType, ContextBuilder, XmlChunkRenderer
from core.context.chunk_render import TAG_ROLES
from core.text.tokens import get_counter
from core.workspace.files import BOOTSTRAP_FILES, ensure_workspace
from core.workspace.skills import SkillsLoader

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
    listed = re.findall(r"^\d+\. \*\*.+?\*\* \(`([^`]+)`\)", seed("000"), re.MULTILINE)
    ours = {  # each seed step and the sections it is in chatterd's prompt
        "_get_identity": ["Identity", "Current time", "Tool guide"],
        "_load_bootstrap_files": list(BOOTSTRAP_FILES),
        "memory.get_memory_context": ["Workspace memory", f"Notes for {CLOCK:%Y-%m-%d}"],
        "skills.load_skills_for_context": ["Skill tidy"],
        "skills.build_skills_summary": ["Skills"],
    }
    assert listed == list(ours)
    prompt = builder.build_system_prompt()
    assert headers(prompt) == [name for step in listed for name in ours[step]]
    identity = prompt.split("# AGENTS.md")[0]
    assert "2026-02-10 01:30" in identity and "Python" in identity  # time, runtime
    assert str(builder.workspace.root) in identity  # and the workspace


def test_seed_001_bootstrap_files_and_layers(builder: ContextBuilder) -> None:
    """Seed 001 §3.3 names the bootstrap files; §2.2 stacks identity, bootstrap, memory,
    skills, then history and the current message."""
    text = seed("001")
    listed = ast.literal_eval(re.search(r"BOOTSTRAP_FILES = (\[.*?\])", text).group(1))  # type: ignore[union-attr]
    assert list(BOOTSTRAP_FILES) == listed
    layers = re.findall(r"│  \d\. \S+ \((\w[\w ]*)\)", text)
    assert layers == [
        "Identity",
        "Bootstrap Files",
        "Memory",
        "Skills",
        "History",
        "Current Message",
    ]
    prompt = builder.build_system_prompt()
    first = [
        prompt.index(h) for h in ("# Identity", "# AGENTS.md", "# Workspace memory", "# Skill")
    ]
    assert first == sorted(first)


def parse_def(source: str) -> ast.stmt:
    """A `def` as the seed shows it: with its body, or a bare signature with or without
    the closing colon."""
    source = textwrap.dedent(source).rstrip()
    for end in ("", "\n    ...", ":\n    ..."):
        try:
            return ast.parse(source + end).body[0]
        except SyntaxError:
            continue
    raise AssertionError(f"not a Python signature: {source}")


def seed_signatures() -> dict[str, list[str]]:
    """The positional parameters (without self) of every method signature in 000 and 001."""
    found: dict[str, list[str]] = {}
    for number in ("000", "001"):
        text = seed(number)
        sources = [b for b in code_blocks(text, "python") if b.lstrip().startswith("def ")]
        inline = re.findall(r"`(def \w+\(.*?\)(?: -> [^`]+)?)`", text)
        sources += [d for d in inline if "(...)" not in d]  # "(...)": shown in full below
        for source in sources:
            func = parse_def(source)
            assert isinstance(func, ast.FunctionDef)
            names = [a.arg for a in func.args.args if a.arg != "self"]
            assert found.setdefault(func.name, names) == names, func.name  # seeds agree
    return found


def test_seed_signatures_are_ours() -> None:
    signatures = seed_signatures()
    assert set(signatures) == {
        "__init__",
        "build_system_prompt",
        "build_messages",
        "add_tool_result",
        "add_assistant_message",
    }
    for name, params in signatures.items():
        ours = inspect.signature(getattr(ContextBuilder, name)).parameters.values()
        positional = [p.name for p in ours if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert [n for n in positional if n != "self"][: len(params)] == params, name
        extra = [p for p in ours if p.name not in params and p.name != "self"]
        assert all(p.default is not p.empty for p in extra), name  # nothing more required


def build_messages_calls() -> list[dict[str, Any]]:
    """The keyword arguments of every `build_messages(...)` example with literal values."""
    calls = []
    for number in ("000", "001"):
        for block in code_blocks(seed(number), "python"):
            if block.lstrip().startswith("def "):
                continue  # a signature without a body (seed_signatures reads those)
            flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            tree = compile(block, f"seed {number}", "exec", flags=flags)
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "build_messages"
                ):
                    continue
                try:
                    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
                    args = [ast.literal_eval(a) for a in node.args]
                except ValueError:
                    continue  # an example over a live session's history
                calls.append(dict(zip(("history", "current_message"), args, strict=False)) | kwargs)
    return calls


def test_seed_build_messages_examples_give_system_history_user(
    builder: ContextBuilder, tmp_path: Path
) -> None:
    """Seed 000 §3.3/§4 and 001 §5: `[system, *history, user]`, images in the user
    message as base64 data URLs, nothing between the history and the current message."""
    calls = build_messages_calls()
    assert len(calls) == 5 and sum(1 for c in calls if c.get("media")) == 2
    picture = tmp_path / "image.png"
    picture.write_bytes(PNG)
    for call in calls:
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
    shown = next(b for b in code_blocks(seed("001"), "python") if '"role": "tool"' in b)
    expected = ast.literal_eval(shown.strip())
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
