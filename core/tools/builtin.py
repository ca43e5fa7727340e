"""The built-in tools every daemon offers: search, remember and forget, remind.

Why apart from the loop: which tools there are is a table; running them is the loop's
job (core/tools/loop.py). Features that bring their own (links, pictures, MCP servers)
register theirs on the registry this returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.tools.memory import forget_tool, remember_tool
from core.tools.registry import ToolRegistry
from core.tools.remind import remind_tool
from core.tools.search import SearchBackend, search_tool

if TYPE_CHECKING:
    from core.reminders.service import Reminders


def default_registry(
    search: SearchBackend | None,
    *,
    search_enabled: bool = True,
    memory_enabled: bool = True,
    reminders: Reminders | None = None,
) -> ToolRegistry:
    """Search (when a backend is given and enabled), Remember and Forget, and Remind
    (when the daemon keeps reminders)."""
    tools = []
    if search is not None:
        tools.append(search_tool(search, enabled=search_enabled))
    tools.append(remember_tool(enabled=memory_enabled))
    tools.append(forget_tool(enabled=memory_enabled))
    if reminders is not None:
        tools.append(remind_tool(reminders))
    return ToolRegistry(tools)
