"""The operator's web console: served on the HTTP server only when a password is set.

Why apart from app.py: whether to serve it, and saying why not, is one decision with its
own log lines; the console's pages import only when it is served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.console.recent import RecentErrors

if TYPE_CHECKING:
    from bot.console import Console, ConsoleDeps

log = logging.getLogger(__name__)


def web_console(
    settings: Settings,
    serving: bool,
    stack: AsyncExitStack,
    deps: Callable[[RecentErrors], ConsoleDeps],
) -> Console | None:
    """The console, or None with a line saying what turns it on. `serving`: this run
    serves channels (`chatterd run`, not a terminal chat)."""
    web, http = settings.web, settings.http
    if not web.enabled or not serving:
        return None
    if web.password is None:
        log.info(
            "web console is off: set [web] password (or CHATTERD_WEB__PASSWORD) to "
            "serve it at http://%s:%d/console",
            http.host,
            http.port,
        )
        return None
    if not http.enabled:
        log.warning(
            "web console is off: it is served by the HTTP server; set [http] enabled = true"
        )
        return None
    errors = RecentErrors()
    root = logging.getLogger()
    root.addHandler(errors)
    stack.callback(root.removeHandler, errors)
    from bot.console import console_site  # only when served

    return console_site(deps(errors), web.password.get_secret_value())
