"""The knowledge base in the daemon: `/kb`, the turn's passages and the `knowledge` tool.

Why lazy: the idle daemon must not pay for numpy or an embedding model nobody uses. The
store (plain SQLAlchemy) answers "does this chat have any documents?"; the knowledge base
itself (`core.knowledge.service`, numpy, the embedder) is built on the first add or
search, and a turn in a chat without documents never builds it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from bot.commands.kb import KbCommand
from bot.commands.table import Commands
from bot.config import Settings
from core.admins import Admins
from core.context.report import KnowledgeNote
from core.jobs.runner import JobRunner
from core.knowledge.intake import DirectIntake, KnowledgeIntake
from core.knowledge.presence import DocumentPresence
from core.knowledge.settings import KnowledgeSettings
from core.knowledge.sources import KnowledgeSources
from core.knowledge.tool import knowledge_tool
from core.media.links import PageReader
from core.media.sandbox import ParseSandbox
from core.messages import InboundMessage
from core.tools.registry import ToolRegistry
from memory.db.migrate import Database
from memory.knowledge.folder import KnowledgeFolderDocuments
from memory.knowledge.store import KnowledgeStore
from memory.knowledge.types import GLOBAL_SCOPE, DocumentInfo
from memory.turns.store import SqlStorage

if TYPE_CHECKING:
    from bot.console.knowledge_desk import KnowledgeDesk
    from core.knowledge.citations import Citations
    from core.knowledge.folder import KnowledgeFolder
    from core.knowledge.ingest import JobIntake
    from core.knowledge.reading import SandboxReader
    from core.knowledge.service import Hit, KnowledgeBase

log = logging.getLogger(__name__)


class DaemonKnowledge:
    """One knowledge base per daemon, built on first use from `[knowledge]`."""

    def __init__(
        self,
        settings: KnowledgeSettings,
        database: Database,
        sources: KnowledgeSources,
        stack: AsyncExitStack,
    ) -> None:
        self.settings = settings
        self.database = database
        self.store = KnowledgeStore(database)
        self._presence = DocumentPresence(self.store)
        self.sources = sources
        self._kb: KnowledgeBase | None = None
        self._building = asyncio.Lock()
        self._direct = DirectIntake(self.base)
        self.intake: KnowledgeIntake = self._direct  # `use_jobs` makes a chat's add a job
        self.queued: JobIntake | None = None  # the "kb_add" jobs' intake, once `use_jobs`
        self.folder: KnowledgeFolder | None = None  # workspace/knowledge/, once `use_jobs`
        self._reader: SandboxReader | None = None
        self._max_file_bytes = 0
        self._defuse = lambda text: text  # the registry's marker defuser, once it exists
        stack.push_async_callback(self.close)

    @property
    def loaded(self) -> bool:
        return self._kb is not None

    async def base(self) -> KnowledgeBase:
        """The knowledge base, built (numpy and the embedder imported) on first use."""
        async with self._building:
            if self._kb is None:
                from core.knowledge.embedders import embedder_from_settings
                from core.knowledge.service import KnowledgeBase

                embedder = embedder_from_settings(self.settings)
                self._kb = KnowledgeBase(self.store, embedder, self.settings)
                log.info("knowledge base opened (embeddings: %s)", embedder.model_id)
                # Passages without this model's vectors (a changed model, a long document
                # whose process stopped) are embedded now; search answers meanwhile.
                self._direct.embed_later(self._kb)
            return self._kb

    # -- what /kb and the CLI call ---------------------------------------------------------

    async def documents(self, scopes: Sequence[str]) -> list[DocumentInfo]:
        return await self.store.documents(scopes)

    async def remove(self, document_id: int, scope: str) -> DocumentInfo | None:
        if self._kb is not None:  # forgets the scope's cached vectors too
            from core.knowledge.scope import Scope

            return await self._kb.remove(document_id, Scope(scope))
        return await self.store.remove(document_id, scope)

    async def hits(self, scope: str, query: str, top_k: int | None = None) -> list[Hit]:
        """The best passages among `scope`'s and the global documents ([] with none)."""
        if not await self._has_documents(scope):
            return []
        from core.knowledge.scope import Scope

        kb = await self.base()
        return await kb.search(query, Scope(scope), top_k or self.settings.top_k)

    async def search_text(self, scope: str, query: str) -> str:
        from core.knowledge.retrieval import hits_text

        return hits_text(await self.hits(scope, query), self._defuse)

    async def _has_documents(self, scope: str) -> bool:
        scopes = [GLOBAL_SCOPE] if scope == GLOBAL_SCOPE else [scope, GLOBAL_SCOPE]
        return await self._presence.any(scopes)

    # -- the turn and the tool ---------------------------------------------------------------

    async def lookup(self, message: InboundMessage, query: str) -> KnowledgeNote | None:
        """The processor's KnowledgeLookup: this chat's and global passages, or None.
        A failure costs the passages, never the turn."""
        from core.knowledge.retrieval import note_for

        if not query.strip():
            return None
        try:
            hits = await self.hits(f"{message.platform}:{message.chat_id}", query)
        except Exception as exc:
            log.warning("knowledge: no passages for this turn (%s)", type(exc).__name__)
            return None
        if not hits:
            return None
        return note_for(hits, self.settings.max_context_tokens, self._defuse)

    async def _tool_search(
        self, platform: str, chat_id: str, query: str, citations: Citations | None = None
    ) -> str:
        """The tool's passages, numbered with the turn's `citations`: one shown earlier in
        the turn keeps its number, a new one continues after the highest."""
        from core.knowledge.render import render_for_context

        hits = await self.hits(f"{platform}:{chat_id}", query)
        return render_for_context(
            hits, max_tokens=self.settings.max_context_tokens, citations=citations
        )

    def add_tool(self, registry: ToolRegistry) -> None:
        """`[Knowledge: query]` / the native `knowledge` function, scoped to the chat."""
        registry.register(knowledge_tool(numbered=self._tool_search))
        self._defuse = registry.defuse_markers

    def add_commands(self, commands: Commands, admins: Admins) -> None:
        command = KbCommand(self, admins, group_members_add=self.settings.group_members_add)
        commands.add("kb", command)

    # -- adds as durable jobs, the folder, the console ---------------------------------------

    def attach(
        self,
        commands: Commands,
        runner: JobRunner,
        storage: SqlStorage,
        sandbox: ParseSandbox,
        settings: Settings,
        admins: Admins,
    ) -> None:
        """`/kb` in the command table, and adds as jobs on the runner (the daemon)."""
        self.add_commands(commands, admins)
        self.use_jobs(runner, storage, sandbox, settings)

    def use_jobs(
        self, runner: JobRunner, storage: SqlStorage, sandbox: ParseSandbox, settings: Settings
    ) -> None:
        """A chat's add (and the folder's and the console's) becomes a "kb_add" job on
        the runner (core/knowledge/ingest.py); the CLI's stays in the call."""
        from core.knowledge.folder import FOLDER_NAME, KnowledgeFolder
        from core.knowledge.ingest import KIND, JobIntake, QueuedIntake, ingest_handler
        from core.knowledge.reading import SandboxReader

        root = settings.bot.workspace / FOLDER_NAME
        root.mkdir(parents=True, exist_ok=True)
        self._max_file_bytes = settings.documents.max_bytes
        self._reader = SandboxReader(sandbox, self.settings.max_bytes + 1, self._max_file_bytes)
        self.queued = JobIntake(storage.jobs, max_pending_per_user=settings.jobs.max_per_user)
        runner.register(KIND, ingest_handler(self.base, self._reader, root, self._embed_later))
        self.intake = QueuedIntake(self.queued, self._direct)
        listing = KnowledgeFolderDocuments(self.database)
        self.folder = KnowledgeFolder(root, self.queued, listing, storage.jobs)

    def watch(self, stop: asyncio.Event, stack: AsyncExitStack) -> None:
        """Watch the knowledge folder until `stop` (the daemon's stop; `stack` waits)."""
        if self.folder is None:
            return
        task = asyncio.create_task(self.folder.run(stop), name="knowledge folder")

        async def stopped() -> None:
            stop.set()
            await task

        stack.push_async_callback(stopped)

    def console_desk(self) -> KnowledgeDesk | None:
        """The console's Knowledge page's services (None until `use_jobs`)."""
        if self.queued is None or self._reader is None:
            return None
        from bot.console.knowledge_desk import KnowledgeDesk

        return KnowledgeDesk(
            listing=KnowledgeFolderDocuments(self.database),
            remove=self.remove,
            intake=self.queued,
            reader=self._reader,
            max_bytes=self._max_file_bytes,
            folder=self.folder.root if self.folder is not None else None,
        )

    def _embed_later(self) -> None:
        """A document searchable by keyword only owes its vectors: the same one-at-a-time
        background embedding as a direct add's."""
        if self._kb is not None:
            self._direct.embed_later(self._kb)

    async def settle(self) -> None:
        """Wait until every document added here has its vectors (the CLI, before exit)."""
        await self._direct.settle()

    async def close(self) -> None:
        await self._direct.close()
        if self._kb is not None:
            await self._kb.close()


def build_knowledge(
    settings: KnowledgeSettings,
    database: Database,
    stack: AsyncExitStack,
    *,
    sandbox: ParseSandbox,
    pages: PageReader | None,
    max_file_bytes: int,
) -> DaemonKnowledge | None:
    """The daemon's knowledge base, or None when `[knowledge] enabled = false`."""
    if not settings.enabled:
        return None
    sources = KnowledgeSources(
        sandbox, pages, max_file_bytes=max_file_bytes, max_text_bytes=settings.max_bytes
    )
    return DaemonKnowledge(settings, database, sources, stack)


def knowledge_desk(knowledge: DaemonKnowledge | None) -> KnowledgeDesk | None:
    """What the console's Knowledge page works through (None: no page)."""
    return knowledge.console_desk() if knowledge is not None else None
