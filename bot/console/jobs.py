"""Jobs: every chat's recent work that outlives a turn (pictures, background tasks), with
cancel.

The same rows `chatterd jobs list` reads and the same cancel `/jobs cancel` runs (an
admin's, by the signed-in operator), so the console has no rules of its own.
"""

from __future__ import annotations

from aiohttp import web

from bot.commands.jobs import age
from bot.console.page import PageHost, actor, flash, see_other, url

SHOWN = 200
OPEN = ("queued", "running")


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        jobs = await console.deps.storage.jobs.recent(limit=SHOWN)
        now = console.deps.clock()
        rows = [
            {
                "job": job,
                "chat": str(job.chat_key),
                "requester": f"{job.requester_name} ({job.requester_key})",
                "age": age(job.created_at, now),
                "attempts": f"{job.attempts}/{job.max_attempts}",
                "open": job.state in OPEN,
            }
            for job in jobs
        ]
        return console.render(request, "jobs.html", rows=rows)

    async def cancel(request: web.Request) -> web.StreamResponse:
        form = await request.post()
        raw = str(form.get("id", ""))
        jobs = console.deps.storage.jobs
        job = await jobs.get(int(raw)) if raw.isdigit() and len(raw) <= 18 else None
        if job is None:
            flash(request, "No such job.")
        elif await jobs.cancel(job, actor(request), console.deps.clock()):
            flash(request, f"Cancelled #{job.id}.")
        else:
            flash(request, f"#{job.id} had already ended ({job.state}).")
        return see_other(url("/jobs"))

    router.add_get("/jobs", page)
    router.add_post("/jobs/cancel", cancel)
