"""The operator's MCP servers as tools, started with the daemon and stopped with it.

The MCP SDK is imported only when `[mcp] servers` names one.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from bot.config import Settings
from core.admins import Admins
from core.text.tokens import TokenCounter
from memory.turns.store import SqlStorage

if TYPE_CHECKING:
    from core.tools.mcp.tools import McpTools


async def start_mcp_tools(
    settings: Settings,
    storage: SqlStorage,
    counter: TokenCounter,
    stack: AsyncExitStack,
    admins: Admins,
) -> McpTools | None:
    """The MCP servers' tools, started now; None (and no SDK import) without servers."""
    if not settings.mcp.servers:
        return None
    from core.tools.mcp.record import SqlCallRecorder
    from core.tools.mcp.tools import McpTools

    tools = McpTools(
        settings.mcp,
        admins,
        count=counter.count,
        recorder=SqlCallRecorder(storage.tool_calls),
    )
    stack.push_async_callback(tools.close)  # every server process ends with us
    await tools.start()
    return tools
