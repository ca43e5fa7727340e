"""The one error the daemon stops on at startup, shared by `bot.wiring.app` and the command line.

It lives apart from `bot.wiring.app` so that `bot.cli.main` can catch it without importing the whole
application (channels, model client) for commands such as `config check`. Every start-up
failure becomes one: exit status 2 and one line saying what to fix (a traceback only
with `--log-level debug`), the same convention as a bad config value.
"""

from __future__ import annotations


class StartupError(Exception):
    """Stops the daemon with exit status 2 and this one line (config, missing model...)."""


# A channel's config section, by the channel's name (bot/wiring/registry.py).
_SECTIONS = {"qq": "onebot"}


def channel_start_failure(channel: str, exc: BaseException) -> StartupError:
    """A channel that could not start, as one line naming the settings to check."""
    text = str(exc).strip() or type(exc).__name__
    section = _SECTIONS.get(channel, channel)
    if text.startswith(f"{channel}:"):  # the channel said it itself, naming its setting
        return StartupError(text)
    if isinstance(exc, OSError):
        return StartupError(
            f"{channel}: cannot start ({text}); check [{section}] host and port, or what "
            "already uses that port"
        )
    return StartupError(f"{channel}: cannot start ({text}); check the [{section}] settings")
