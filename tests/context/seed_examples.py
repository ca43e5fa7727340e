"""The seed documents' examples, written out literally for tests/context/test_seed_shapes.py.

Each constant is one example as its seed shows it, named by seed number and section, so
reading a seed beside this file shows at once whether an example is missing here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.context import ChunkType

# -- seed 004: every chunk tag example ----------------------------------------------------


@dataclass(frozen=True)
class TagExample:
    """One XML example of seed 004: its chunk type (the `### ChunkType.X` section), label
    (the comment above it, else its tag), tag, attributes in order, and body (dedented)."""

    type: ChunkType
    label: str
    tag: str
    attrs: list[tuple[str, str]]
    body: str


ATTR = re.compile(r'([a-z_]+)="([^"]*)"')


def _example(type: ChunkType, label: str, tag: str, attrs: str, body: str) -> TagExample:
    """A row as the seed writes it: `attrs` is the opening tag's attribute text."""
    return TagExample(type, label, tag, ATTR.findall(attrs), body)


_T = ChunkType
# Seed 004's examples, in the seed's order.
SEED_004: list[TagExample] = [
    _example(
        _T.SYSTEM,
        "system_context",
        "system_context",
        'id="chunk_xxx" priority="1000"',
        "系统上下文内容",
    ),
    _example(_T.AGENT, "role: user", "user_message", 'id="chunk_xxx" role="user"', "用户消息内容"),
    _example(
        _T.AGENT,
        "role: assistant",
        "assistant_response",
        'id="chunk_xxx" role="assistant"',
        "助手回复内容",
    ),
    _example(
        _T.AGENT,
        "role: assistant, action: clarification",
        "assistant_clarification",
        'id="chunk_xxx" role="assistant" action="clarification"',
        "澄清问题",
    ),
    _example(
        _T.WORKFLOW,
        "Tool Call",
        "tool_call",
        'id="chunk_xxx" action="tool_call" tool="read_file" call_id="call_123" status="pending"',
        '{"path": "/src/main.ts"}',
    ),
    _example(
        _T.WORKFLOW,
        "Skill Call",
        "skill_call",
        'id="chunk_xxx" action="skill_call" skill="code_review" call_id="call_456" '
        'status="pending"',
        '{"code": "..."}',
    ),
    _example(
        _T.DELEGATION,
        "Spawn SubAgent",
        "spawn_subagent",
        'id="chunk_xxx" subagent_id="agent_123" agent_type="researcher"',
        '{"task": "Search for..."}',
    ),
    _example(
        _T.DELEGATION,
        "Message to SubAgent",
        "message_to_subagent",
        'id="chunk_xxx" subagent_id="agent_123"',
        "请继续调研...",
    ),
    _example(
        _T.DELEGATION,
        "SubAgent Result",
        "subagent_result",
        'id="chunk_xxx" subagent_id="agent_123" success="true"',
        "调研结果...",
    ),
    _example(
        _T.DELEGATION,
        "Parent Agent Message",
        "parent_agent_message",
        'id="chunk_xxx" parent_agent_id="agent_000"',
        "父级任务指令",
    ),
    _example(
        _T.ENVIRONMENT,
        "Tool Result",
        "tool_result",
        'id="chunk_xxx" tool="read_file" call_id="call_123" success="true"',
        "文件内容...",
    ),
    _example(
        _T.ENVIRONMENT,
        "Tool Error",
        "tool_result",
        'id="chunk_xxx" tool="read_file" call_id="call_123" success="false" error="true"',
        "File not found",
    ),
    _example(
        _T.ENVIRONMENT,
        "Skill Result",
        "skill_result",
        'id="chunk_xxx" skill="code_review" call_id="call_456" success="true"',
        "Review 结果...",
    ),
    _example(
        _T.WORKING_FLOW,
        "Compacted Progress Summary",
        "progress_summary",
        'id="chunk_xxx" compacted_at="1703..." original_count="15"',
        "## Progress Summary\n### Completed Actions\n- Action 1\n- Action 2",
    ),
    _example(
        _T.WORKING_FLOW,
        "TODO Update",
        "todo_update",
        'id="chunk_xxx" action="todo_set"',
        '{"todos": [...]}',
    ),
    _example(
        _T.WORKING_FLOW,
        "Thinking",
        "thinking",
        'id="chunk_xxx" subtype="THINKING"',
        "思考过程...",
    ),
    _example(
        _T.WORKING_FLOW,
        "User Intervention",
        "user_intervention",
        'id="chunk_xxx" subtype="USER"',
        "用户中途的干预",
    ),
    _example(
        _T.OUTPUT,
        "Task Completed",
        "task_completed",
        'id="chunk_xxx"',
        '{"result": "...", "summary": "..."}',
    ),
    _example(
        _T.OUTPUT,
        "Task Abandoned",
        "task_abandoned",
        'id="chunk_xxx" reason="无法完成"',
        '{"partialResult": "..."}',
    ),
    _example(
        _T.OUTPUT,
        "Task Terminated",
        "task_terminated",
        'id="chunk_xxx" terminated_by="user"',
        "任务被终止",
    ),
]


# -- seeds 000 and 001: nanobot's ContextBuilder ------------------------------------------

# Seed 000 §3.3: `build_system_prompt`'s parts, in order, by the method that gives each.
SEED_000_PROMPT_STEPS = [
    "_get_identity",
    "_load_bootstrap_files",
    "memory.get_memory_context",
    "skills.load_skills_for_context",
    "skills.build_skills_summary",
]
# Seed 001 §3.3 (and seed 000 §3.2's table): the bootstrap files, in order.
SEED_001_BOOTSTRAP_FILES = ["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md"]
# Seed 001 §2.2: the layers of the context, in order.
SEED_001_LAYERS = ["Identity", "Bootstrap Files", "Memory", "Skills", "History", "Current Message"]

# The positional parameters (without self) of every method signature seeds 000 and 001 show
# (000 §3.2-3.3, 001 §4.1-4.2; where both show one, they agree).
SEED_SIGNATURES: dict[str, list[str]] = {
    "__init__": ["workspace"],
    "build_system_prompt": ["skill_names"],
    "build_messages": ["history", "current_message", "skill_names", "media", "channel", "chat_id"],
    "add_tool_result": ["messages", "tool_call_id", "tool_name", "result"],
    "add_assistant_message": ["messages", "content", "tool_calls"],
}

# Every `build_messages(...)` example with literal values, keyword arguments as the seed
# passes them (an example over a live session's history, 000 §4.3, has none to check).
# The seeds' "/path/to/image.jpg" stands for one picture; the test passes a real PNG.
SEED_BUILD_MESSAGES_CALLS: dict[str, dict[str, Any]] = {
    "000 §4.1": {
        "history": [{"role": "user", "content": "你好"}],
        "current_message": "幫我寫一個 Python 函式",
        "channel": "cli",
        "chat_id": "direct",
    },
    "000 §4.2": {
        "history": [],
        "current_message": "描述這張圖片",
        "media": ["/path/to/image.jpg"],
    },
    "001 §5.1": {
        "history": [
            {"role": "user", "content": "你好"},
            {"role": "assistant", "content": "你好！有什么可以帮助你的？"},
        ],
        "current_message": "请帮我列出当前目录的文件",
        "channel": "cli",
        "chat_id": "direct",
    },
    "001 §5.2": {
        "history": [],
        "current_message": "这张图片里是什么？",
        "media": ["/path/to/image.jpg"],
        "channel": "telegram",
        "chat_id": "12345",
    },
    "001 §5.3": {
        "history": [],
        "current_message": "帮我创建一个新的 Python 文件",
        "channel": "cli",
        "chat_id": "direct",
    },
}

# Seed 001 §3.6: the tool message `add_tool_result` appends, keys in this order.
SEED_001_TOOL_MESSAGE = {
    "role": "tool",
    "tool_call_id": "...",
    "name": "tool_name",
    "content": "工具执行结果",
}
