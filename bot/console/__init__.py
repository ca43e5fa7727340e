"""The operator's console: a web page under /console on the HTTP server.

`console_site(deps, password).register` is handed to the HTTP channel (its `registrars`);
the pages read through memory.console.browse and memory.console.activity and change
things through the services the chat commands use (`MemoryService`,
`ChatSettingsStore`). See docs/console.md.

Console, ConsoleDeps and console_site are imported on first use: the pages pull in Jinja2
and the charts, which a daemon without `[web] password` never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.console.recent import RecentErrors

if TYPE_CHECKING:
    from bot.console.page import ConsoleDeps
    from bot.console.site import console_site
    from bot.console.web import Console

_LAZY = {"Console": "web", "ConsoleDeps": "page", "console_site": "site"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"bot.console.{module}"), name)


__all__ = ["Console", "ConsoleDeps", "RecentErrors", "console_site"]
