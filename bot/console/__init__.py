"""The operator's console: a web page under /console on the HTTP server.

`Console(deps, password).register` is handed to the HTTP channel (its `registrars`);
the pages read through memory.browse and memory.activity and change things through the
services the chat commands use (`MemoryService`, `ChatSettingsStore`). See docs/console.md.

Console and ConsoleDeps are imported on first use: the pages pull in Jinja2 and the
charts (a few MiB resident), which a daemon without `[web] password` never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.console.recent import RecentErrors

if TYPE_CHECKING:
    from bot.console.web import Console, ConsoleDeps


def __getattr__(name: str) -> Any:
    if name in ("Console", "ConsoleDeps"):
        from bot.console import web

        return getattr(web, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Console", "ConsoleDeps", "RecentErrors"]
