"""Which channels exist, when each is enabled, and how to build it.

The composition root walks this table; adding a platform is one entry here, not an
if/else in the wiring. Factories import their platform library lazily, so a daemon
without Telegram never imports python-telegram-bot.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from bot.config import Settings
from channels.base import Channel, ChannelHealth

RunMode = Literal["run", "chat"]


@dataclass(frozen=True)
class ChannelDeps:
    settings: Settings
    health_source: Callable[[], Mapping[str, ChannelHealth]]
    console_in: TextIO
    console_out: TextIO
    console_user: str
    # More /healthz sections beside the channels (turn states, model endpoints).
    extra_health: Callable[[], Awaitable[dict[str, Any]]] | None = None
    # More routes on the HTTP channel's server (the operator's console), filled in by the App.
    http_routes: tuple[Callable[[Any], None], ...] = ()
    # The stored kind of a chat ("private"/"group"), so the HTTP API binds its chats.
    chat_owner: Callable[[str, str, str], Awaitable[str]] | None = None


@dataclass(frozen=True)
class ChannelSpec:
    name: str
    enabled: Callable[[Settings, RunMode, ChannelDeps], bool]
    create: Callable[[ChannelDeps], Channel]


def _http(deps: ChannelDeps) -> Channel:
    from channels.http.channel import HttpChannel

    return HttpChannel(
        deps.settings.http,
        deps.health_source,
        extra_health=deps.extra_health,
        registrars=deps.http_routes,
        chat_owner=deps.chat_owner,
    )


def _console(deps: ChannelDeps) -> Channel:
    from channels.console import ConsoleChannel

    return ConsoleChannel(
        deps.console_in,
        deps.console_out,
        user_id=deps.console_user,
        user_name=deps.console_user,
        bot_name=deps.settings.bot.name,
        prompt=deps.console_in.isatty(),
    )


def _telegram(deps: ChannelDeps) -> Channel:
    from channels.telegram import TelegramChannel

    settings = deps.settings
    return TelegramChannel(
        settings.telegram,
        image_max_bytes=settings.vision.max_bytes,
    )


def _onebot(deps: ChannelDeps) -> Channel:
    from channels.onebot import OneBotChannel

    return OneBotChannel(deps.settings.onebot, image_max_bytes=deps.settings.vision.max_bytes)


def _console_wanted(settings: Settings, mode: RunMode, deps: ChannelDeps) -> bool:
    # `chatterd chat` is the console; `chatterd run` adds it when a person is at the terminal.
    return mode == "chat" or deps.console_in.isatty()


CHANNELS: tuple[ChannelSpec, ...] = (
    ChannelSpec("http", lambda s, mode, d: mode == "run" and s.http.enabled, _http),
    ChannelSpec("telegram", lambda s, mode, d: mode == "run" and s.telegram.enabled, _telegram),
    ChannelSpec("qq", lambda s, mode, d: mode == "run" and s.onebot.enabled, _onebot),
    ChannelSpec("console", _console_wanted, _console),
)


def default_console_deps(
    settings: Settings, health_source: Callable[[], Mapping[str, ChannelHealth]]
) -> ChannelDeps:
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "local"
    return ChannelDeps(settings, health_source, sys.stdin, sys.stdout, user)
