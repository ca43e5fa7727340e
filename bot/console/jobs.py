"""Jobs: every chat's recent work that outlives a turn (pictures, background tasks), with
cancel.

The same rows `chatterd jobs list` reads and the same cancel `/jobs cancel` runs (an
admin's, by the signed-in operator), so the console has no rules of its own.
"""

from __future__ import annotations

from aiohttp import web

from bot.commands.jobs import age
from bot.console.page import PageHost, cancel_posted

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

    async def cancel_job(job_id: int | None, by: str) -> str:
        jobs = console.deps.storage.jobs
        job = await jobs.get(job_id) if job_id is not None else None
        if job is None:
            return "No such job."
        ended = not await jobs.cancel(job, by, console.deps.clock())
        return f"#{job.id} had already ended ({job.state})." if ended else f"Cancelled #{job.id}."

    async def cancel(request: web.Request) -> web.StreamResponse:
        return await cancel_posted(request, "/jobs", cancel_job)

    router.add_get("/jobs", page)
    router.add_post("/jobs/cancel", cancel)
