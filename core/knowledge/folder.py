"""The knowledge folder (`workspace/knowledge/`): files an operator drops in are indexed.

Files at the folder's top level are global documents; a subfolder named after a chat
(`telegram:-100123`, `qq:group:5`) holds that chat's. Only .md, .markdown, .txt, .pdf
and .docx files directly in those places count; hidden files and other subfolders are
skipped.

Why polling and not inotify: no new dependency, and a few stat calls cost nothing next to
indexing. Every change is one durable "kb_add" job that re-reads the file ("make the
knowledge base match this file"), safe to run twice. The folder's documents carry
`added_by = "folder:<relative path>"`, so at start the watcher reconciles the folder with
the knowledge base. A file is submitted once its size and mtime held still for one poll
(never read half-copied), and never while its previous job is waiting or running.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.knowledge.ingest import FOLDER_AUTHOR, IngestRequest, Requester
from core.knowledge.reading import readable
from memory.jobs.types import Job, JobRefused

if TYPE_CHECKING:
    from core.knowledge.scope import Scope
    from memory.knowledge.types import DocumentInfo

log = logging.getLogger(__name__)

FOLDER_NAME = "knowledge"
CHAT_FOLDER = re.compile(r"^[a-z][a-z0-9_]{0,19}:\S{1,140}$")
MAX_RELATIVE = 190  # "folder:" + the relative path fits added_by (200 characters)
ACTIVE = ("queued", "running")


@dataclass(frozen=True)
class FileState:
    scope: str
    name: str
    size: int
    mtime_ns: int

    @property
    def signature(self) -> tuple[int, int]:
        return self.size, self.mtime_ns

    @property
    def modified(self) -> datetime:
        return datetime.fromtimestamp(self.mtime_ns / 1e9, UTC)


class FolderDocuments(Protocol):
    """Every document the folder added, in any scope (memory/knowledge/folder.py)."""

    async def by_author_prefix(self, prefix: str) -> list[DocumentInfo]: ...


class Submits(Protocol):
    async def submit(self, request: IngestRequest) -> Job: ...


class JobStates(Protocol):
    async def get(self, job_id: int) -> Job | None: ...


def scan(root: Path) -> dict[str, FileState]:
    """The folder's indexable files by relative path ("rules.md", "telegram:-1/faq.pdf")."""
    from core.knowledge.scope import Scope

    found: dict[str, FileState] = {}
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            chat = chat_scope(entry.name)
            if chat is None:
                continue
            scope = chat.key
            files = [(f"{entry.name}/{f.name}", f) for f in entry.iterdir()]
        else:
            scope, files = Scope.everyone().key, [(entry.name, entry)]
        for relative, path in files:
            if len(relative) > MAX_RELATIVE or not readable(path.name):
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            if path.is_file():
                found[relative] = FileState(scope, path.name, stat.st_size, stat.st_mtime_ns)
    return found


def chat_scope(name: str) -> Scope | None:
    """The chat a folder (or a console form) names: `telegram:-100123`, `qq:group:5`."""
    from core.knowledge.scope import Scope

    if not CHAT_FOLDER.match(name) or name == "global":
        return None
    platform, chat_id = name.split(":", 1)
    return Scope.chat(platform, chat_id)


class KnowledgeFolder:
    """Keeps the knowledge base in step with the folder: `start()` once, then `poll()`
    every `interval_s` (`run(stop)` does both)."""

    def __init__(
        self,
        root: Path,
        intake: Submits,
        documents: FolderDocuments,
        jobs: JobStates,
        *,
        interval_s: float = 3.0,
    ) -> None:
        self.root = root
        self._intake = intake
        self._documents = documents
        self._jobs = jobs
        self._interval_s = interval_s
        self._seen: dict[str, FileState] = {}  # the last scan
        self._done: dict[str, FileState | None] = {}  # what was last submitted (None: gone)
        self._jobs_of: dict[str, int] = {}  # the last job submitted per file

    async def start(self) -> int:
        """Compare the folder with the knowledge base; submit what differs. Returns how
        many jobs were submitted."""
        files = await asyncio.to_thread(scan, self.root)
        held: dict[str, list[DocumentInfo]] = {}
        for doc in await self._documents.by_author_prefix(FOLDER_AUTHOR):
            held.setdefault(doc.added_by.removeprefix(FOLDER_AUTHOR), []).append(doc)
        submitted = 0
        for relative, state in files.items():
            if _indexed(state, held.get(relative, [])):
                self._done[relative] = state
            elif await self._submit(relative, state):
                submitted += 1
        for relative, docs in held.items():
            if relative not in files and await self._submit_gone(relative, docs[0]):
                submitted += 1
        self._seen = files
        return submitted

    async def poll(self) -> int:
        """Submit files that changed and held still since the last poll, and files that
        were deleted. Returns how many jobs were submitted."""
        files = await asyncio.to_thread(scan, self.root)
        submitted = 0
        for relative, state in files.items():
            before = self._seen.get(relative)
            if before is None or before.signature != state.signature:
                continue  # new or still changing: wait for it to hold still
            if _same(self._done.get(relative), state) or await self._busy(relative):
                continue
            if await self._submit(relative, state):
                submitted += 1
        for relative, last in list(self._done.items()):
            if relative in files or last is None or await self._busy(relative):
                continue
            if await self._submit_gone(relative, last):
                submitted += 1
        self._seen = files
        return submitted

    async def run(self, stop: asyncio.Event) -> None:
        try:
            count = await self.start()
            log.info("knowledge folder %s: %d file(s) to index or remove", self.root, count)
        except Exception:
            log.exception("knowledge folder: the first scan failed; polling goes on")
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self._interval_s)
            except TimeoutError:
                pass
            if stop.is_set():
                break
            try:
                await self.poll()
            except Exception:
                log.exception("knowledge folder: a scan failed; trying again")

    async def _busy(self, relative: str) -> bool:
        job_id = self._jobs_of.get(relative)
        if job_id is None:
            return False
        job = await self._jobs.get(job_id)
        return job is not None and job.state in ACTIVE

    async def _submit(self, relative: str, state: FileState) -> bool:
        return await self._send(relative, state.scope, state.name, state)

    async def _submit_gone(self, relative: str, last: FileState | DocumentInfo) -> bool:
        name = last.name if isinstance(last, FileState) else last.source
        return await self._send(relative, last.scope, name, None)

    async def _send(self, relative: str, scope: str, name: str, state: FileState | None) -> bool:
        from core.knowledge.scope import Scope

        request = IngestRequest(
            scope=Scope(scope),
            source=name,
            requester=Requester.nobody("folder", "folder"),
            file=relative,
            added_by=FOLDER_AUTHOR + relative,
        )
        try:
            job = await self._intake.submit(request)
        except (JobRefused, ValueError) as exc:
            log.warning("knowledge folder: %s not submitted: %s", relative, exc)
            return False
        self._jobs_of[relative] = job.id
        if state is None:
            self._done.pop(relative, None)
        else:
            self._done[relative] = state
        log.info(
            "knowledge folder: %s %s (job #%d)",
            "indexing" if state else "removing",
            relative,
            job.id,
        )
        return True


def _same(a: FileState | None, b: FileState) -> bool:
    return a is not None and a.signature == b.signature and a.scope == b.scope


def _indexed(state: FileState, docs: Sequence[DocumentInfo]) -> bool:
    """The file has a ready document in its scope made after its last change."""
    return any(
        d.state == "ready" and d.scope == state.scope and d.created_at >= state.modified
        for d in docs
    )
