"""The operator's console: a web page under /console on the HTTP server.

`Console(deps, password).register` is handed to the HTTP channel (its `registrars`);
the pages read through memory.browse and memory.activity and change things through the
services the chat commands use (`MemoryService`, `ChatSettingsStore`). See docs/console.md.
"""

from bot.console.recent import RecentErrors
from bot.console.web import Console, ConsoleDeps

__all__ = ["Console", "ConsoleDeps", "RecentErrors"]
