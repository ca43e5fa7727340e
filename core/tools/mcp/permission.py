"""Who may use which MCP tool: one pure rule, asked before the model call and again
when a call runs.

Why per sender and not per chat: being allowed to talk to the bot is not permission to
change things through it. `allow = "auto"` (the default) offers what a server marks
read-only (`readOnlyHint`) to everyone the bot serves and everything else to admins
only; a server's `allow` and a tool's `tool_allow` entry widen or narrow that. Nothing
here reads the model's words: the sender comes from the turn's context.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.tools.mcp.config import Allow, McpServerConfig


@dataclass(frozen=True)
class Sender:
    """The person a turn is for, as the permission rule needs them."""

    key: str  # "platform:id", as in [bot] admins
    admin: bool


@dataclass(frozen=True)
class Decision:
    """A rule's answer and which rule gave it: a tool's permission here, and the access
    rules' (core/turn/access.py: whether a message is served, whether a group is listed)."""

    allowed: bool
    why: str  # for admins' /tools, `/bot status` and the logs: which rule decided


def decide(server: McpServerConfig, tool: str, read_only: bool, sender: Sender) -> Decision:
    """May `sender` use `tool` of `server`? `read_only` is the server's own annotation."""
    if tool in server.tool_allow:
        return _apply(server.tool_allow[tool], read_only, sender, f"tool_allow.{tool}")
    return _apply(server.allow, read_only, sender, "allow")


def _apply(rule: Allow, read_only: bool, sender: Sender, key: str) -> Decision:
    if isinstance(rule, list):
        listed = sender.key in rule
        return Decision(listed or sender.admin, f"{key}: {'listed' if listed else 'a list'}")
    if rule == "everyone":
        return Decision(True, f'{key} = "everyone"')
    if rule == "admins":
        return Decision(sender.admin, f'{key} = "admins"')
    if read_only:
        return Decision(True, f'{key} = "auto", read-only')
    return Decision(sender.admin, f'{key} = "auto", may change things: admins only')


def allows(rule: Allow, sender: Sender) -> bool:
    """The same rule for a tool of our own that may change things or cost money (the
    `draw` tool's `[images] allow`): "auto" counts as admins only."""
    return _apply(rule, False, sender, "allow").allowed
