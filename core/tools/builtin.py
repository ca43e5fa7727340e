"""The built-in tools every daemon offers: search, remember and forget.

Why apart from the loop: which tools there are is a table; running them is the loop's
job (core/tools/loop.py). Features that bring their own (reminders, links, pictures, MCP
servers) own their tool and wiring registers it on the registry this returns.
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
