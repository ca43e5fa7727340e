"""Reminders: every chat's active and missed reminders and scheduled tasks, with cancel.

The same rows `/remind list` reads and the same cancel `/remind cancel` runs (an admin's),
so the console has no rules of its own.
"""

from __future__ import annotations

from itertools import groupby

from aiohttp import web

from bot.console.page import PageHost, actor, flash, see_other, url
from core.reminders.service import list_line

SHOWN = 500


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        found = await console.deps.storage.reminders.listing(limit=SHOWN)
        found.sort(key=lambda r: (r.chat_key, r.id))
        now = console.deps.clock()
        chats = [
            (chat, [(r, list_line(r, now, show_owner=True)) for r in rows])
            for chat, rows in groupby(found, key=lambda r: r.chat_key)
        ]
        return console.render(request, "reminders.html", chats=chats)

    async def cancel(request: web.Request) -> web.StreamResponse:

        form = await request.post()
        raw = str(form.get("id", ""))
        if not raw.isdigit():
            flash(request, "No such reminder.")
        elif await console.deps.storage.reminders.cancel(int(raw), by=actor(request)):
            flash(request, f"Cancelled #{raw}.")
        else:
            flash(request, f"#{raw} was not active any more.")
        return see_other(url("/reminders"))

    router.add_get("/reminders", page)
    router.add_post("/reminders/cancel", cancel)
