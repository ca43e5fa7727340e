"""Tags and escaping: how a chunk becomes `<tag id=".." k="v"> \\nbody \\n</tag>` text.

The tag table and the way a chunk's id, metadata and content go inside its tag are the
safety boundary of chunk rendering: user text must never pose as another kind of chunk.

Content that is not text (a tool call's arguments, a JSON result) is rendered as the
compact JSON in `Chunk.text` and neutralised like any text; a registered renderer is
given the chunk, so it sees the original value in `Chunk.content`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from core.context.chunk_types import Chunk, ChunkType
from core.text.escaping import escape_attr, neutralize_tags

# Every default tag and the role its message takes unless the chunk names one.
TAG_ROLES: Mapping[str, str] = MappingProxyType(
    {
        "system_context": "system",
        "user_message": "user",
        "assistant_response": "assistant",
        "assistant_clarification": "assistant",
        "tool_call": "assistant",
        "skill_call": "assistant",
        "tool_result": "user",
        "skill_result": "user",
        "spawn_subagent": "assistant",
        "message_to_subagent": "assistant",
        "subagent_result": "user",
        "parent_agent_message": "user",
        "progress_summary": "system",
        "todo_update": "assistant",
        "thinking": "assistant",
        "user_intervention": "user",
        "task_completed": "assistant",
        "task_abandoned": "assistant",
        "task_terminated": "assistant",
    }
)
DEFAULT_TAGS = frozenset(TAG_ROLES)
_RESULT_TAGS = frozenset({"tool_result", "skill_result", "subagent_result"})
# The conversational tags carry their role (and a clarification its action) in the tag,
# as the seed format writes them: `<user_message id="c2" role="user">`.
_ROLE_TAGS = frozenset({"user_message", "assistant_response", "assistant_clarification"})
_ACTIONS: Mapping[str, str] = MappingProxyType({"assistant_clarification": "clarification"})
# A chunk's `action` (in its metadata) names its tag within its type, as the seed's
# chunks do: an ENVIRONMENT chunk with action="tool_result" is a <tool_result>.
_ACTION_TAGS: Mapping[ChunkType, Mapping[str, str]] = MappingProxyType(
    {
        ChunkType.AGENT: {"clarification": "assistant_clarification"},
        ChunkType.WORKFLOW: {"tool_call": "tool_call", "skill_call": "skill_call"},
        ChunkType.DELEGATION: {
            tag: tag
            for tag in (
                "spawn_subagent",
                "message_to_subagent",
                "subagent_result",
                "parent_agent_message",
            )
        },
        ChunkType.ENVIRONMENT: {"tool_result": "tool_result", "skill_result": "skill_result"},
        ChunkType.WORKING_FLOW: {"todo_set": "todo_update", "todo_update": "todo_update"},
        ChunkType.OUTPUT: {
            tag: tag for tag in ("task_completed", "task_abandoned", "task_terminated")
        },
    }
)
# The seed writes the action on these tags (`<tool_call id=".." action="tool_call" ..>`);
# on the others the tag itself says it, so an action that chose the tag is not repeated.
_ACTION_ATTR_TAGS = frozenset({"assistant_clarification", "tool_call", "skill_call", "todo_update"})
# The seed's working-flow subtypes, shown on their tag: `<thinking id=".." subtype="THINKING">`.
SUBTYPE_TAGS: Mapping[str, str] = MappingProxyType(
    {"THINKING": "thinking", "USER": "user_intervention"}
)
# The tag of a chunk without `subtype`: (type, role) -> tag, then (type, None) -> tag.
_TYPE_TAGS: Mapping[tuple[ChunkType, str | None], str] = MappingProxyType(
    {
        (ChunkType.SYSTEM, None): "system_context",
        (ChunkType.ENVIRONMENT, None): "system_context",
        (ChunkType.AGENT, "user"): "user_message",
        (ChunkType.AGENT, None): "assistant_response",
        (ChunkType.WORKFLOW, "user"): "tool_result",
        (ChunkType.WORKFLOW, None): "tool_call",
        (ChunkType.DELEGATION, "user"): "subagent_result",
        (ChunkType.DELEGATION, None): "spawn_subagent",
        (ChunkType.WORKING_FLOW, None): "progress_summary",
        (ChunkType.OUTPUT, None): "task_completed",
    }
)


@runtime_checkable
class ChunkRenderer(Protocol):
    """Renders chunks it can handle; registered renderers are asked before the defaults."""

    def can_render(self, chunk: Chunk) -> bool: ...

    def get_role(self, chunk: Chunk) -> str: ...

    def render(self, chunk: Chunk) -> str: ...


_ATTR_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def _attr_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return escape_attr(str(value))
    return escape_attr(json.dumps(value, ensure_ascii=False, default=str, sort_keys=True))


def _attr_name(key: Any) -> str | None:
    name = _ATTR_NAME_BAD.sub("_", str(key))
    if not name:
        return None
    return name if (name[0].isalpha() or name[0] == "_") else "_" + name


class XmlChunkRenderer:
    """The default renderer: `<tag id=".." k="v"> \\nbody \\n</tag>` for every chunk."""

    def __init__(self, extra_tags: Iterable[str] = ()) -> None:
        self.tags = DEFAULT_TAGS | frozenset(extra_tags)

    def can_render(self, chunk: Chunk) -> bool:
        return chunk.subtype is None or chunk.subtype in TAG_ROLES or chunk.subtype in SUBTYPE_TAGS

    def tag_for(self, chunk: Chunk) -> str:
        """`subtype` (a tag, or a seed subtype such as THINKING), else the `action` in the
        metadata within the chunk's type, else the type and role."""
        if chunk.subtype is not None:
            if chunk.subtype in SUBTYPE_TAGS:
                return SUBTYPE_TAGS[chunk.subtype]
            if chunk.subtype not in TAG_ROLES:
                raise ValueError(
                    f"chunk {chunk.id!r}: unknown subtype {chunk.subtype!r}; register a "
                    f"renderer for it or use one of {sorted(TAG_ROLES)} or {sorted(SUBTYPE_TAGS)}"
                )
            return chunk.subtype
        by_action = _action_tag(chunk)
        if by_action is not None:
            return by_action
        return _TYPE_TAGS.get((chunk.type, chunk.role)) or _TYPE_TAGS[(chunk.type, None)]

    def get_role(self, chunk: Chunk) -> str:
        return chunk.role or TAG_ROLES[self.tag_for(chunk)]

    def open_tag(self, chunk: Chunk, tag: str) -> str:
        """id, role, action and subtype first, then the metadata, then success/error:
        the seed's attribute order."""
        attrs = [f'id="{escape_attr(str(chunk.id))}"']
        fixed = {"id"}
        meta = chunk.metadata
        if tag in _ROLE_TAGS:
            attrs.append(f'role="{escape_attr(self.get_role(chunk))}"')
            fixed.add("role")
        action = _ACTIONS.get(tag) or meta.get("action")
        if tag in _ACTION_ATTR_TAGS and action is not None:
            attrs.append(f'action="{_attr_text(action)}"')
            fixed.add("action")
        elif _action_tag(chunk) == tag:
            fixed.add("action")  # the tag says it
        if chunk.subtype in SUBTYPE_TAGS:
            attrs.append(f'subtype="{chunk.subtype}"')
            fixed.add("subtype")
        results = tag in _RESULT_TAGS and "success" in meta
        if results:
            fixed |= {"success", "error"}
        for key, value in meta.items():
            if key in fixed:
                continue  # the chunk's id, role and action win; success is written below
            name, text = _attr_name(key), _attr_text(value)
            if name is not None and text is not None:
                attrs.append(f'{name}="{text}"')
        if results:
            ok = bool(meta["success"])
            attrs.append(f'success="{"true" if ok else "false"}"')
            error = _attr_text(meta.get("error"))
            if error is not None:
                attrs.append(f'error="{error}"')
            elif not ok:
                attrs.append('error="true"')
        return f"<{tag} {' '.join(attrs)}>"

    def parts(self, chunk: Chunk) -> tuple[str, str, str]:
        """(head, body, tail); body is stripped and neutralised, empty for empty chunks."""
        tag = self.tag_for(chunk)
        body = neutralize_tags(chunk.text.strip(), self.tags)
        opening = self.open_tag(chunk, tag)
        if not body:
            return opening, "", f"</{tag}>"
        return opening + " \n", body, f" \n</{tag}>"

    def render(self, chunk: Chunk) -> str:
        return "".join(self.parts(chunk))


def _action_tag(chunk: Chunk) -> str | None:
    """The tag the chunk's `action` names within its type, if it names one."""
    action = chunk.metadata.get("action")
    if not isinstance(action, str):
        return None
    return _ACTION_TAGS.get(chunk.type, {}).get(action)
