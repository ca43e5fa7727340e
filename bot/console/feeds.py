"""Feeds: every chat's followed feeds (`/sub`), with remove; daily digests are on the
Reminders page (they are reminders of kind `digest`).

The same rows `/sub list` reads and the same removal `/sub remove` runs, so the console
has no rules of its own.
"""

from __future__ import annotations

from itertools import groupby

from aiohttp import web

from bot.console.page import PageHost, cancel_posted
from memory.digest.store import DigestStore

SHOWN = 500


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    store = DigestStore(console.deps.storage.database)

    async def page(request: web.Request) -> web.StreamResponse:
        found = await store.all_feeds(limit=SHOWN)
        found.sort(key=lambda f: (str(f.chat_key), f.id))
        chats = [(str(chat), list(rows)) for chat, rows in groupby(found, key=lambda f: f.chat_key)]
        return console.render(request, "feeds.html", chats=chats)

    async def remove_feed(feed_id: int | None, by: str) -> str:
        feed = await store.feed(feed_id) if feed_id is not None else None
        if feed is None or not await store.remove_feed(feed.platform, feed.chat_id, feed.id):
            return "No such feed."
        return f"Stopped following #{feed.id} in {feed.chat_key}."

    async def remove(request: web.Request) -> web.StreamResponse:
        return await cancel_posted(request, "/feeds", remove_feed)

    router.add_get("/feeds", page)
    router.add_post("/feeds/remove", remove)
