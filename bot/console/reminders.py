"""Reminders: every chat's active and missed reminders and scheduled tasks, with cancel.

The same rows `/remind list` reads and the same cancel `/remind cancel` runs (an admin's),
so the console has no rules of its own.
"""

from __future__ import annotations

from itertools import groupby

from aiohttp import web

from bot.console.page import PageHost, cancel_posted
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

    async def cancel_reminder(reminder_id: int | None, by: str) -> str:
        if reminder_id is None:
            return "No such reminder."
        if await console.deps.storage.reminders.cancel(reminder_id, by=by):
            return f"Cancelled #{reminder_id}."
        return f"#{reminder_id} was not active any more."

    async def cancel(request: web.Request) -> web.StreamResponse:
        return await cancel_posted(request, "/reminders", cancel_reminder)

    router.add_get("/reminders", page)
    router.add_post("/reminders/cancel", cancel)
