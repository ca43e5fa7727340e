"""The console's Jobs page: every chat's jobs listed (kind, chat, requester, state, age,
attempts), an open one cancelled from there, a request without the CSRF token refused."""

from __future__ import annotations

from pathlib import Path

from memory.jobs.types import JobDraft
from tests.console.console_support import (
    ESCAPED,
    HOSTILE,
    client,
    console_settings,
    running,
    sign_in,
)
from tests.fakes.openai_server import FakeOpenAI


def draft(kind: str, chat: str, name: str) -> JobDraft:
    """A job of a kind this daemon does not run (no [images], no indexer): it stays open."""
    return JobDraft(kind, "qq", chat, "group", "20002", name, args={"task": "x"})


async def test_jobs_are_listed_and_an_open_one_is_cancelled_from_the_console(
    tmp_path: Path, database_url: str
) -> None:
    async with FakeOpenAI(reply="unused") as model:
        settings = console_settings(tmp_path, database_url, model)
        async with running(settings) as daemon, client() as session:
            storage = daemon.app.storage
            assert storage is not None
            first = await storage.jobs.add(draft("index", "group:30003", HOSTILE))
            second = await storage.jobs.add(draft("draw", "group:30004", "Ann"))
            token = await sign_in(session, daemon.base)
            async with session.get(f"{daemon.base}/console/jobs") as page:
                html = await page.text()
            assert "<td>index</td>" in html and "<td>draw</td>" in html
            assert "<td>qq:group:30003</td>" in html and "<td>queued</td>" in html
            assert "<td>0/3</td>" in html and "(qq:20002)" in html
            assert ESCAPED in html and HOSTILE not in html
            assert f"Cancel #{first.id}" in html and f"Cancel #{second.id}" in html
            form = {"csrf": token, "id": str(second.id)}
            async with session.post(
                f"{daemon.base}/console/jobs/cancel", data=form, allow_redirects=False
            ) as done:
                assert done.status == 303
            async with session.get(f"{daemon.base}/console/jobs") as page:
                html = await page.text()
            assert f"Cancelled #{second.id}." in html and "<td>cancelled</td>" in html
            assert f"Cancel #{second.id}" not in html  # an ended job has no button
            async with session.post(
                f"{daemon.base}/console/jobs/cancel", data=form, allow_redirects=False
            ) as again:
                assert again.status == 303
            async with session.get(f"{daemon.base}/console/jobs") as page:
                assert "had already ended (cancelled)" in await page.text()
            refused = {"id": str(first.id)}  # no CSRF token: refused, nothing cancelled
            async with session.post(
                f"{daemon.base}/console/jobs/cancel", data=refused, allow_redirects=False
            ) as done:
                assert done.status == 403
            kept = await storage.jobs.get(first.id)
            cancelled = await storage.jobs.get(second.id)
    assert kept is not None and kept.state == "queued"
    assert cancelled is not None and cancelled.state == "cancelled"
    assert cancelled.outcome == f"Job #{second.id} was cancelled by console@127.0.0.1."
