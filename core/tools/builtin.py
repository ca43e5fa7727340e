"""The built-in tools every daemon offers: search, remember and forget.

Which tools there are is a table, apart from running them; features that bring their
own tool (reminders, links, pictures, MCP) are registered on this registry by wiring.
"""

from __future__ import annotations

from core.tools.memory import forget_tool, remember_tool
from core.tools.registry import ToolRegistry
from core.tools.search import SearchBackend, search_tool


def default_registry(
    search: SearchBackend | None,
    *,
    search_enabled: bool = True,
    memory_enabled: bool = True,
) -> ToolRegistry:
    """Search (when a backend is given and enabled), Remember and Forget."""
    tools = []
    if search is not None:
        tools.append(search_tool(search, enabled=search_enabled))
    tools.append(remember_tool(enabled=memory_enabled))
    tools.append(forget_tool(enabled=memory_enabled))
    return ToolRegistry(tools)
