"""Knowledge: every scope's documents, an upload form, and remove.

The same services as `/kb`: an upload is read (in the parse sandbox) and handed to the
same intake as `/kb add`, so it becomes a "kb_add" job (core/knowledge/ingest.py);
removal is `KnowledgeBase.remove`. A document that came from the knowledge folder is
removed with its file, or the folder would add it again at the next start.
"""

from __future__ import annotations

import asyncio
import logging
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from bot.console.knowledge_desk import KnowledgeDesk
from bot.console.page import Page, PageHost, actor, flash, see_other, url
from core.knowledge.folder import chat_scope
from core.knowledge.ingest import FOLDER_AUTHOR, KIND, IngestRequest, Requester
from core.knowledge.reading import ReadFailed, readable

if TYPE_CHECKING:
    from core.knowledge.scope import Scope
    from memory.knowledge.types import DocumentInfo

log = logging.getLogger(__name__)

UPLOAD_PATH = "/knowledge/upload"
SHOWN = 1000
RECENT_JOBS = 10


def parse_scope(text: str) -> Scope | None:
    """`global`, or a chat as `platform:chat_id`; None for anything else."""
    from core.knowledge.scope import Scope

    text = text.strip()
    return Scope.everyone() if text == "global" else chat_scope(text)


def knowledge_page(desk: KnowledgeDesk) -> Page:
    """The page's routes, bound to `desk`."""

    def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
        async def page(request: web.Request) -> web.StreamResponse:
            docs = await desk.listing.by_author_prefix("", limit=SHOWN)
            docs.sort(key=lambda d: (d.scope != "global", d.scope, d.id))
            scopes = [(scope, list(rows)) for scope, rows in groupby(docs, key=lambda d: d.scope)]
            jobs = [j for j in await console.deps.storage.jobs.recent(limit=100) if j.kind == KIND]
            return console.render(
                request,
                "knowledge.html",
                scopes=scopes,
                jobs=jobs[:RECENT_JOBS],
                folder=str(desk.folder) if desk.folder is not None else None,
                from_folder=FOLDER_AUTHOR,
                max_mb=round(desk.max_bytes / (1024 * 1024), 1),
            )

        async def upload(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            field = form.get("file")
            scope = parse_scope(str(form.get("scope", "")))
            try:
                if not isinstance(field, web.FileField) or not field.filename:
                    flash(request, "Choose a file to upload.")
                elif scope is None:
                    flash(request, "The scope must be global or a chat as platform:chat_id.")
                elif not readable(field.filename):
                    name = Path(field.filename).name
                    flash(request, f"{name}: only .md, .txt, .pdf and .docx are indexed.")
                else:
                    flash(request, await _add(desk, field, scope, actor(request)))
            finally:
                for value in form.values():
                    if isinstance(value, web.FileField):
                        await asyncio.to_thread(value.file.close)
            return see_other(url("/knowledge"))

        async def remove(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            raw, scope = str(form.get("id", "")), parse_scope(str(form.get("scope", "")))
            if not raw.isdigit() or scope is None:
                flash(request, "No such document.")
                return see_other(url("/knowledge"))
            gone = await desk.remove(int(raw), scope.key)
            if gone is None:
                flash(request, f"#{raw} was not in {scope.key} any more.")
            else:
                note = await _remove_file(desk.folder, gone)
                log.info("console: %s removed knowledge document #%d", actor(request), gone.id)
                flash(request, f"Removed #{gone.id} ({gone.source}){note}.")
            return see_other(url("/knowledge"))

        router.add_get("/knowledge", page)
        router.add_post(UPLOAD_PATH, upload)
        router.add_post("/knowledge/remove", remove)

    return add_routes


async def _add(desk: KnowledgeDesk, field: web.FileField, scope: Scope, who: str) -> str:
    name = Path(field.filename).name
    data = await asyncio.to_thread(field.file.read)
    try:
        pages = await desk.reader.pages(data, name)
    except ReadFailed as exc:
        return f"📚 {name} not added: {exc}"
    request = IngestRequest(
        scope, name, Requester.nobody("console", who[:60]), pages=pages, added_by=who
    )
    return await desk.intake.add(request)


async def _remove_file(folder: Path | None, doc: DocumentInfo) -> str:
    """Delete a folder document's file; what to add to the page's line."""
    if folder is None or not doc.added_by.startswith(FOLDER_AUTHOR):
        return ""
    relative = doc.added_by.removeprefix(FOLDER_AUTHOR)

    def delete() -> bool:
        root = folder.resolve()
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            return False
        path.unlink(missing_ok=True)
        return True

    return f" and its file knowledge/{relative}" if await asyncio.to_thread(delete) else ""
