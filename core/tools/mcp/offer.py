"""What one sender is offered this turn: the tools they may use, within the budget.

Pure and SDK-free: given the servers' tool lists, the sender and when each tool was last
used, it decides the offer (permission first, then the least recently used dropped
until the definitions fit `[mcp] max_tool_tokens`) and renders it for either mode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.tools.mcp.config import McpServerConfig
from core.tools.mcp.permission import Decision, Sender, decide
from core.tools.mcp.render import argument_summary, function_schema, offered_name
from core.tools.mcp.session import ToolInfo

CALL_TOOL = "mcp_call"  # the registry's one markers-mode tool for every MCP tool
CALL_MARKER = "Call"
# `[Call: server__tool {"json": "object"}]` on one line; the object may hold brackets.
CALL_PATTERN = re.compile(
    r"\[[ \t]*Call[ \t]*:[ \t]*(?P<arg>[A-Za-z0-9_-]{1,64}(?:[ \t]+\{[^\n]{0,4000}\})?)[ \t]*\]",
    re.IGNORECASE,
)
DESCRIPTION_CHARS = 300


@dataclass(frozen=True)
class Entry:
    """One MCP tool under the name the model sees."""

    name: str  # server__tool
    info: ToolInfo
    config: McpServerConfig

    def decide(self, sender: Sender) -> Decision:
        return decide(self.config, self.info.name, self.info.read_only, sender)

    def description(self) -> str:
        text = " ".join(self.info.description.split()) or f"{self.info.name} ({self.info.server})"
        return text[:DESCRIPTION_CHARS]

    def function(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description(),
                "parameters": function_schema(self.info.input_schema),
            },
        }

    def marker_line(self) -> str:
        args = argument_summary(function_schema(self.info.input_schema))
        return f"- [Call: {self.name} {{...}}] {self.description()} Arguments: {args}."


@dataclass(frozen=True)
class Offer:
    entries: tuple[Entry, ...] = ()
    dropped: tuple[str, ...] = ()  # allowed, but cut to fit the budget (least recently used)
    tokens: int = 0  # of the offered definitions

    @property
    def names(self) -> frozenset[str]:
        return frozenset(e.name for e in self.entries)

    def functions(self) -> list[dict[str, Any]]:
        return [e.function() for e in self.entries]

    def guide_lines(self, *, native: bool) -> list[str]:
        if not self.entries:
            return []
        if native:
            return [f"- {e.name}: {e.description()}" for e in self.entries]
        head = (
            '- Tools from connected services: write [Call: name {"argument": "value"}] with '
            "the arguments as one JSON object on one line (omit it when there are none):"
        )
        return [head, *(f"  {e.marker_line()}" for e in self.entries)]


def make_offer(
    entries: Sequence[Entry],
    sender: Sender,
    *,
    native: bool,
    last_used: Mapping[str, float],
    max_tokens: int,
    count: Callable[[str], int],
) -> Offer:
    """Allowed entries, most recently used first, until the token cap; the order shown
    is the servers' own so the prompt stays stable from turn to turn."""
    allowed = [e for e in entries if e.decide(sender).allowed]
    ranked = sorted(allowed, key=lambda e: -last_used.get(e.name, 0.0))
    kept: set[str] = set()
    dropped: list[str] = []
    used = 0
    for entry in ranked:
        text = json.dumps(entry.function()) if native else entry.marker_line()
        cost = count(text)
        if max_tokens and used + cost > max_tokens:
            dropped.append(entry.name)
            continue
        kept.add(entry.name)
        used += cost
    return Offer(tuple(e for e in allowed if e.name in kept), tuple(dropped), used)


def build_entries(tools: Sequence[ToolInfo], configs: Mapping[str, McpServerConfig]) -> list[Entry]:
    """Every tool under its model-facing name; a name two tools would share is dropped
    (`name_clashes` says which, for the operator)."""
    clashes = name_clashes(tools)
    return [
        Entry(name, info, configs[info.server])
        for info in tools
        if (name := offered_name(info.server, info.name)) not in clashes
    ]


def name_clashes(tools: Sequence[ToolInfo]) -> dict[str, list[str]]:
    """Model-facing names that two or more tools would share -> those tools
    (`server/tool`). Neither is offered: the model could not say which it meant."""
    owners: dict[str, list[str]] = {}
    for info in tools:
        owners.setdefault(offered_name(info.server, info.name), []).append(
            f"{info.server}/{info.name}"
        )
    return {name: found for name, found in owners.items() if len(found) > 1}
