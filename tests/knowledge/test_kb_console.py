"""The knowledge base in the running daemon, from the operator's side: the workspace's
knowledge folder and the web console's Knowledge page, over real HTTP.

What must hold: a file in the folder at start, and one dropped in while the daemon runs,
become documents of the right scope through "kb_add" jobs; the page lists them per scope;
an upload larger than the chat API's body limit is added to the chosen scope as a job;
removing a folder document deletes its file (or the folder would add it again); a form
without its CSRF token changes nothing. SQLite, or PostgreSQL with
CHATTERD_TEST_DATABASE_URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from memory.knowledge.folder import KnowledgeFolderDocuments
from memory.knowledge.types import DocumentInfo
from tests.console.console_support import Running, client, console_settings, running, sign_in
from tests.fakes.files import make_pdf
from tests.fakes.openai_server import FakeOpenAI

RULES = "# Bans\nCheating in the game gets you banned for good.\n"


async def until(check: Callable[[], Awaitable[bool]], within_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.1)


async def documents(run: Running) -> list[DocumentInfo]:
    assert run.app.storage is not None
    return await KnowledgeFolderDocuments(run.app.storage.database).by_author_prefix("")


async def ready(run: Running, source: str) -> DocumentInfo | None:
    return next(
        (d for d in await documents(run) if d.source == source and d.state == "ready"), None
    )


async def page(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(f"{base}/console/knowledge") as answer:
        assert answer.status == 200
        return await answer.text()


async def test_the_folder_and_the_console_page_fill_list_and_empty_the_knowledge_base(
    tmp_path: Path, database_url: str, fake: FakeOpenAI
) -> None:
    knowledge = {"embeddings": "openai", "base_url": fake.base_url}
    settings = console_settings(tmp_path, database_url, fake, knowledge=knowledge)
    folder = tmp_path / "workspace" / "knowledge"
    folder.mkdir(parents=True)
    (folder / "rules.md").write_text(RULES)
    async with running(settings) as run, client() as session:

        async def rules_ready() -> bool:
            return await ready(run, "rules.md") is not None

        await until(rules_ready)  # indexed at start
        (folder / "telegram:-100111").mkdir()
        (folder / "telegram:-100111" / "faq.txt").write_text("The club meets on Tuesdays.")

        async def faq_ready() -> bool:
            return await ready(run, "faq.txt") is not None

        await until(faq_ready)  # noticed while running
        token = await sign_in(session, run.base)
        html = await page(session, run.base)
        assert '<a href="/console/knowledge" aria-current="page">Knowledge</a>' in html
        assert "<h2>global</h2>" in html and "<h2>telegram:-100111</h2>" in html
        assert (
            "file knowledge/rules.md" in html and "file knowledge/telegram:-100111/faq.txt" in html
        )

        manual = make_pdf(
            [f"Page {n} of the manual: {'the router blinks green. ' * 60}" for n in range(40)]
        )
        assert len(manual) > 64 * 1024  # more than the chat API's body limit
        form = aiohttp.FormData()
        form.add_field("csrf", token)
        form.add_field("scope", "qq:group:5")
        form.add_field("file", manual, filename="manual.pdf", content_type="application/pdf")
        async with session.post(
            f"{run.base}/console/knowledge/upload", data=form, allow_redirects=False
        ) as done:
            assert done.status == 303, await done.text()
        assert "📚 adding manual.pdf (job #" in await page(session, run.base)

        async def manual_ready() -> bool:
            return await ready(run, "manual.pdf") is not None

        await until(manual_ready)
        pdf = await ready(run, "manual.pdf")
        assert pdf is not None and pdf.scope == "qq:group:5" and pdf.chunk_count >= 40
        assert pdf.added_by.startswith("console@")

        rules = await ready(run, "rules.md")
        assert rules is not None
        listing = await page(session, run.base)  # each row's Remove form: its id and scope
        assert (
            f'name="id" value="{rules.id}"' in listing and 'name="scope" value="global"' in listing
        )
        assert f"Remove #{rules.id}</button>" in listing and f'value="{token}"' in listing
        refused = {"id": str(rules.id), "scope": "global"}  # no CSRF token
        async with session.post(
            f"{run.base}/console/knowledge/remove", data=refused, allow_redirects=False
        ) as done:
            assert done.status == 403
        assert (folder / "rules.md").exists()

        form_data = {"csrf": token, "id": str(rules.id), "scope": "global"}
        async with session.post(
            f"{run.base}/console/knowledge/remove", data=form_data, allow_redirects=False
        ) as done:
            assert done.status == 303
        html = await page(session, run.base)
        assert f"Removed #{rules.id} (rules.md) and its file knowledge/rules.md." in html
        assert not (folder / "rules.md").exists()
        assert await ready(run, "rules.md") is None

        bad = aiohttp.FormData()
        bad.add_field("csrf", token)
        bad.add_field("scope", "not a chat")
        bad.add_field("file", b"hello", filename="x.md", content_type="text/markdown")
        async with session.post(f"{run.base}/console/knowledge/upload", data=bad) as done:
            assert "The scope must be global or a chat as platform:chat_id." in await done.text()
