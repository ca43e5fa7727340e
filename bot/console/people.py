"""People and their long-term memories: view, add, forget one, clear, export.

Every change goes through `MemoryService`, the same as `/memory` in a chat: the same
limits, the same duplicate rule, the same audit log line (naming `console@address`).
"""

from __future__ import annotations

from aiohttp import web

from bot.console.chats import platform_and_id
from bot.console.page import PageHost, actor, flash, see_other, url
from bot.console.params import row_id
from memory.memories.service import MemoryRefused, MemoryService

PAGE = 50


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    memories = MemoryService(console.deps.storage)

    async def people(request: web.Request) -> web.StreamResponse:
        search = request.query.get("q", "")[:200]
        page = await console.browse.people(limit=PAGE, after=_after(request), search=search)
        return console.render(request, "people.html", page=page, search=search)

    async def person(request: web.Request) -> web.StreamResponse:
        platform, user_id = platform_and_id(request.query)
        row = await console.browse.person(platform, user_id)
        if row is None:
            return console.missing(request, f"person {platform}:{user_id}")
        items = await memories.numbered(platform, user_id)
        return console.render(request, "person.html", person=row, memories=items)

    async def export(request: web.Request) -> web.StreamResponse:
        platform, user_id = platform_and_id(request.query)
        lines = await memories.export_jsonl(platform, user_id)
        name = "".join(c if c.isalnum() else "-" for c in f"{platform}-{user_id}")
        return web.Response(
            text="".join(line + "\n" for line in lines),
            content_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="memories-{name}.jsonl"'},
        )

    async def change(request: web.Request) -> web.StreamResponse:

        form = await request.post()
        platform, user_id = platform_and_id(form)
        by = actor(request)
        action = form.get("action")
        try:
            if action == "add":
                added = await memories.add(platform, user_id, str(form.get("text", "")), author=by)
                flash(request, "Saved." if added else "Already remembered.")
            elif action == "forget":
                memory_id = str(form.get("memory", ""))
                if not memory_id.isdigit():
                    raise MemoryRefused("No memory was chosen.")
                await memories.forget_id(platform, user_id, int(memory_id), by=by)
                flash(request, "Forgotten.")
            elif action == "clear":
                if form.get("confirm") != "yes":
                    raise MemoryRefused("Tick the box to confirm, then clear again.")
                removed = await memories.clear(platform, user_id, by=by)
                flash(request, f"Forgot {removed} item(s).")
            else:
                raise MemoryRefused("Unknown action.")
        except MemoryRefused as refused:
            flash(request, str(refused))
        return see_other(url("/person", platform=platform, id=user_id))

    router.add_get("/people", people)
    router.add_get("/person", person)
    router.add_get("/person/export", export)
    router.add_post("/person/memory", change)


def _after(request: web.Request) -> str | None:
    """The page cursor, checked (a crafted value is a 400 page, not a 500)."""
    after = request.query.get("after")
    return str(row_id(after, "after")) if after else None
