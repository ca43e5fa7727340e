"""The one error the daemon stops on at startup, shared by `bot.app` and the command line.

It lives apart from `bot.app` so that `bot.cli` can catch it without importing the whole
application (channels, model client) for commands such as `config check`.
"""

from __future__ import annotations


class StartupError(Exception):
    """Stops the daemon with exit status 2 and this one line (config, missing model...)."""
