"""What a console page is handed: the host it reads and renders through, and the helpers
every page uses.

Why a module of its own: the pages (overview, chats, people, settings, reminders) and the
web layer that mounts them (web.py) both need these; with them here, web.py never imports
a page and no page imports web.py, so pages register themselves on what they are handed
(`Page`), and bot/console/site.py names which pages the console has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from aiohttp import web

from bot.config import Settings
from bot.console.auth import Session
from bot.console.params import PREFIX
from bot.console.recent import RecentErrors
from channels.base import ChannelHealth
from core.clock import WallClock, utc_now
from core.context.report import ContextReport
from memory.chats.settings import ChatSettings
from memory.chats.types import ChatKey
from memory.turns.store import SqlStorage

if TYPE_CHECKING:
    from bot.console.knowledge_desk import KnowledgeDesk
    from memory.console.activity import Activity
    from memory.console.browse import Browse

SESSION_KEY = web.RequestKey("console.session", Session)


class ChatSettingsAccess(Protocol):
    """ChatSettingsStore's methods the console uses; the App hands it the message path's
    cached store, so a change made here applies to the next message at once."""

    async def get(self, key: ChatKey) -> ChatSettings: ...

    async def update(self, key: ChatKey, *, by: str, **changes: Any) -> ChatSettings: ...

    async def reset(self, key: ChatKey, *, by: str) -> ChatSettings: ...

    async def listing(
        self, limit: int = 100, after_id: int | None = None
    ) -> list[ChatSettings]: ...


@dataclass(frozen=True)
class ConsoleDeps:
    """What the pages read and change; the same services the chat commands use."""

    settings: Settings
    storage: SqlStorage
    health: Callable[[], Mapping[str, ChannelHealth]]
    extra_health: Callable[[], Awaitable[dict[str, Any]]]
    last_report: Callable[[str, str], ContextReport | None]
    errors: RecentErrors
    chat_settings: ChatSettingsAccess
    clock: WallClock = utc_now
    knowledge: KnowledgeDesk | None = None  # the Knowledge page's services (None: no page)


class PageHost(Protocol):
    """The console as its pages see it (bot.console.web.Console is one)."""

    @property
    def deps(self) -> ConsoleDeps: ...

    @property
    def browse(self) -> Browse: ...

    @property
    def activity(self) -> Activity: ...

    def render(self, request: web.Request, template: str, **values: Any) -> web.Response: ...

    def missing(self, request: web.Request, what: str) -> web.Response: ...


# A page: adds its routes to the console's router, reading and rendering through the host.
Page = Callable[[web.UrlDispatcher, PageHost], None]


def see_other(location: str) -> web.Response:
    """303: after a form, the browser GETs the next page (reloading never re-posts)."""
    return web.Response(status=303, headers={"Location": location})


def url(path: str, **query: object) -> str:
    """A console URL with its query (values escaped); None values are left out."""
    given = {key: value for key, value in query.items() if value is not None}
    return PREFIX + path + (f"?{urlencode(given)}" if given else "")


def flash(request: web.Request, text: str) -> None:
    """A one-line result shown on the next page this session opens."""
    session = request.get(SESSION_KEY)
    if session is not None:
        session.flash = text


def actor(request: web.Request) -> str:
    """Who changed something, for the audit lines the services write."""
    return f"console@{request.remote or 'unknown'}"


async def cancel_posted(
    request: web.Request, back: str, cancel: Callable[[int | None, str], Awaitable[str]]
) -> web.Response:
    """A page's Cancel button: the form's row id (None when it is not one), the line
    `cancel(id, actor)` answers shown on the next page, and back to the page."""
    raw = str((await request.post()).get("id", ""))
    row_id = int(raw) if raw.isdigit() and len(raw) <= 18 else None
    flash(request, await cancel(row_id, actor(request)))
    return see_other(url(back))
