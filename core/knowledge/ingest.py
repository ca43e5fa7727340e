"""Adding a document as a durable job ("kb_add") on the one job runner.

Why a job: a process killed while reading or embedding must leave the document
searchable whole after restart, or reported failed, and never stored twice. A document
is accepted (`indexing`, with its pages) and finished (`ready`) in two transactions, and
the same content in a scope is one document; a retried attempt that gets "already
there" finishes the accepted row from its stored pages (`KnowledgeBase.resume(id)`).
Finishing is conditional on the row still being `indexing`, so two finishers write it
once.

The job's arguments say what to add: already-read `text` or `pages` (a chat's `/kb add`,
a console upload), or a `file` under the knowledge folder that the job reads itself
(core/knowledge/folder.py). A `file` job also replaces the file's earlier version, and
removes the file's documents when the file is gone: the folder is the truth for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.jobs.asking import refused_line
from core.jobs.runner import NO_CHAT, JobContext, JobHandler, JobOutcome
from core.knowledge.intake import AddRequest, KnowledgeIntake
from core.knowledge.reading import PageReader, ReadFailed
from core.media.documents import Page
from memory.jobs.types import Job, JobAsker, JobDraft, JobRefused

if TYPE_CHECKING:  # numpy and the store load with the knowledge base, not with the seam
    from core.knowledge.service import Added, DocumentInfo, KnowledgeBase, Scope
    from memory.jobs.store import JobStore as IngestJobs

log = logging.getLogger(__name__)

KIND = "kb_add"
FOLDER_AUTHOR = "folder:"  # added_by of a folder file's documents: "folder:<relative path>"
SOURCE_CHARS = 120


@dataclass(frozen=True)
class Requester(JobAsker):
    """Who asked, and where the job's one line goes (`chat_type` NO_CHAT: nowhere)."""

    @classmethod
    def nobody(cls, where: str, who: str) -> Requester:
        """A job no chat asked for (the folder, the console): its outcome is only logged."""
        return cls("knowledge", where, NO_CHAT, who, who)


@dataclass(frozen=True)
class IngestRequest:
    """One document to add to `scope`: its text, its pages, or a folder file to read."""

    scope: Scope
    source: str
    requester: Requester
    text: str | None = None
    pages: Sequence[Page] = field(default_factory=tuple)
    file: str | None = None  # relative to the knowledge folder
    added_by: str = ""


def short(name: str) -> str:
    """A source name on one line, for a chat line or a log."""
    flat = " ".join(name.split())
    return flat if len(flat) <= SOURCE_CHARS else flat[: SOURCE_CHARS - 1] + "…"


def job_draft(request: IngestRequest) -> JobDraft:
    who = request.requester
    args: dict[str, Any] = {
        "scope": request.scope.key,
        "source": request.source,
        "added_by": request.added_by or who.sender_key,
    }
    if request.file is not None:
        args["file"] = request.file
    elif request.text is not None:
        args["text"] = request.text
    else:
        args["pages"] = [{"text": p.text, "locator": p.locator} for p in request.pages]
    return who.draft(KIND, args)


class JobIntake:
    """Submits "kb_add" jobs: the chat is told at once that the document is on its way,
    and told again, by the runner, when it is searchable or why not."""

    def __init__(self, jobs: IngestJobs, *, max_pending_per_user: int = 0) -> None:
        self._jobs = jobs
        self._max_pending = max_pending_per_user

    async def submit(self, request: IngestRequest) -> Job:
        """Store the job (JobRefused over `[jobs] max_per_user`; nothing stored)."""
        limit = 0 if request.requester.chat_type == NO_CHAT else self._max_pending
        return await self._jobs.add(job_draft(request), max_pending_per_user=limit)

    async def add(self, request: IngestRequest) -> str:
        """One line for the chat: the job is on its way, or why it was not taken."""
        try:
            job = await self.submit(request)
        except JobRefused as exc:
            return f"📚 {short(request.source)} not added: {refused_line(exc)}"
        return (
            f"📚 adding {short(request.source)} (job #{job.id}); I will say when it is searchable."
        )


class QueuedIntake:
    """The KnowledgeIntake seam (core/knowledge/intake.py) over jobs: an add a chat asked
    for becomes a "kb_add" job whose line goes back to that chat; one with no chat (the
    CLI, waiting in the shell) goes to `direct` and happens in the call."""

    def __init__(self, jobs: JobIntake, direct: KnowledgeIntake) -> None:
        self._jobs = jobs
        self._direct = direct

    async def add(self, request: AddRequest) -> str:
        from core.knowledge.scope import Scope

        message = request.origin
        if message is None:
            return await self._direct.add(request)
        who = Requester(
            message.platform,
            message.chat_id,
            str(message.chat_type),
            message.sender_id,
            message.sender_name,
            message_id=message.message_id,
            thread_id=message.thread_id,
        )
        text, pages = (
            (request.content, ()) if isinstance(request.content, str) else (None, request.content)
        )
        ingest = IngestRequest(
            Scope(request.scope),
            request.source,
            who,
            text=text,
            pages=pages,
            added_by=request.added_by,
        )
        return await self._jobs.add(ingest)


def added_line(source: str, added: Added) -> str:
    doc = added.document
    count = f"{doc.chunk_count} passage" + ("" if doc.chunk_count == 1 else "s")
    line = f"📚 added {short(source)} (#{doc.id}): {count}"
    if not added.embedded:
        line += " (searchable by keyword now, by meaning once embedded)"
    return line


def ingest_handler(
    open_kb: Callable[[], Awaitable[KnowledgeBase]],
    reader: PageReader,
    folder: Path | None = None,
    embed_later: Callable[[], None] | None = None,
) -> JobHandler:
    """The runner's handler for "kb_add" jobs, on the knowledge base `open_kb` gives (built
    on first use). `folder`: where `file` jobs read (None: such jobs fail with one line).
    `embed_later`: called when a document is searchable by keyword only (vectors owed)."""

    async def ingest(job: Job, context: JobContext) -> JobOutcome:
        from core.knowledge.service import Added, KnowledgeRefused, Scope

        kb = await open_kb()
        args = job.args
        scope, source = Scope(str(args["scope"])), str(args["source"])
        author = str(args.get("added_by") or "")
        if "file" in args:
            content: str | list[Page] | None
            try:
                content = await _read_file(folder, str(args["file"]), reader)
            except ReadFailed as exc:
                return JobOutcome(f"📚 {short(source)} not added: {exc}", state="failed")
            if content is None:  # the file is gone: so are its documents
                removed = await _remove_file_documents(kb, scope, author, keep=None)
                return JobOutcome(
                    f"📚 removed {short(source)}: its file is gone", result={"removed": removed}
                )
        elif "text" in args:
            content = str(args["text"])
        else:
            content = [Page(str(p["text"]), str(p.get("locator", ""))) for p in args["pages"]]
        try:
            added = await kb.add(content, source, scope, added_by=author)
        except KnowledgeRefused as exc:
            return JobOutcome(f"📚 {short(source)} not added: {exc}", state="failed")
        doc = added.document
        ours = context.progress.get("document_id") == doc.id or (
            job.attempts > 1 and doc.created_at >= job.created_at
        )
        if added.duplicate and doc.state == "indexing":
            # Accepted by a stopped attempt (or by another add of the same text that is
            # still running): finish it from its stored pages; it is finished only once.
            finished = await kb.resume(doc.id)
            current = finished[0].document if finished else await _document(kb, scope, doc.id)
            if current is None or current.state != "ready":
                raise RuntimeError(f"document #{doc.id} was not finished; trying again")
            embedded = finished[0].embedded if finished else True
            added, ours = Added(current, duplicate=False, embedded=embedded), True
        await context.checkpoint(document_id=doc.id)
        removed = 0
        if "file" in args:
            removed = await _remove_file_documents(kb, scope, author, keep=doc.id)
        result = {"document_id": doc.id, "duplicate": added.duplicate and not ours}
        if removed:
            result["replaced"] = removed
        if not added.embedded and embed_later is not None:
            embed_later()
        if added.duplicate and not ours:
            text = f"📚 {short(source)} is already in the knowledge base as #{doc.id}"
            return JobOutcome(text, result=result)
        return JobOutcome(added_line(source, added), result=result)

    return ingest


async def _read_file(folder: Path | None, relative: str, reader: PageReader) -> list[Page] | None:
    """The pages of a folder file; None when it no longer exists."""
    if folder is None:
        raise ReadFailed("this process has no knowledge folder")

    def read() -> tuple[str, bytes] | None:
        root = folder.resolve()
        path = (root / relative).resolve()
        if not path.is_relative_to(root):
            raise ReadFailed("the file is outside the knowledge folder")
        try:
            return path.name, path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ReadFailed(f"the file cannot be read ({type(exc).__name__})") from None

    found = await asyncio.to_thread(read)
    if found is None:
        return None
    name, data = found
    return await reader.pages(data, name)


async def _document(kb: KnowledgeBase, scope: Scope, document_id: int) -> DocumentInfo | None:
    return next((d for d in await kb.list(scope) if d.id == document_id), None)


async def _remove_file_documents(
    kb: KnowledgeBase, scope: Scope, author: str, keep: int | None
) -> int:
    """Remove the documents of one folder file in `scope` but `keep` (its current one)."""
    if not author.startswith(FOLDER_AUTHOR):
        return 0
    removed = 0
    for doc in await kb.list(scope):
        if doc.added_by == author and doc.id != keep:
            if await kb.remove(doc.id, scope) is not None:
                removed += 1
    return removed
