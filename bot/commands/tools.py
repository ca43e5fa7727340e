"""/tools: which tools from connected services (MCP) the asking person may use.

Everyone sees what they may use; admins see every tool, whether each is offered to
whom and why (the rule that decided), and each server's state. The answer comes from
the same rule the turn path uses (core/tools/mcp/permission.py), so it cannot differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.messages import InboundMessage, Reply
from core.tools.registry import ToolContext

if TYPE_CHECKING:  # the MCP SDK is imported only when servers are configured
    from core.tools.mcp.tools import McpTools


class ToolsCommand:
    def __init__(self, tools: McpTools | None) -> None:
        self._tools = tools

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        tools = self._tools
        if tools is None or not tools.links:
            return Reply("No tools from connected services are set up ([mcp] servers).")
        ctx = ToolContext.for_message(message, None)
        sender = tools.sender(ctx)
        entries = tools.entries()
        if not sender.admin:
            mine = [e for e in entries if e.decide(sender).allowed]
            if not mine:
                return Reply("You cannot use any tools from connected services here.")
            lines = ["Tools you can use (ask me in words; I call them for you):"]
            lines += [f"- {e.name}: {e.description()}" for e in mine]
            return Reply("\n".join(lines))
        everyone = _member_of_nobody(ctx)
        lines = ["MCP servers:"]
        for name, link in tools.links.items():
            state = link.health()
            note = f" ({state['error']})" if state.get("error") else ""
            lines.append(f"- {name}: {state['state']}, {state['tools']} tool(s){note}")
        lines.append("Tools (✓ = offered to everyone the bot serves; otherwise admins only):")
        for entry in entries:
            decision = entry.decide(tools.sender(everyone))
            mark = "✓" if decision.allowed else "admins"
            ro = "read-only" if entry.info.read_only else "may change things"
            lines.append(f"- {entry.name} [{mark}] {ro}; {decision.why}")
        if not entries:
            lines.append("- (none yet)")
        return Reply("\n".join(lines))


def _member_of_nobody(ctx: ToolContext) -> ToolContext:
    """A sender who is no admin and on no list: what an ordinary member gets."""
    return ToolContext(platform="-", chat_id=ctx.chat_id, user_id="-", display_name="member")
