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
from core.context.report import KnowledgeNote
from core.knowledge.intake import DirectIntake, KnowledgeIntake
from core.knowledge.settings import KnowledgeSettings
from core.knowledge.sources import KnowledgeSources
from core.media.links import PageReader
from core.media.sandbox import ParseSandbox
from core.messages import InboundMessage
from core.tools.knowledge import knowledge_tool
from core.tools.registry import ToolRegistry
from memory.knowledge import GLOBAL_SCOPE, DocumentInfo, KnowledgeStore
from memory.migrate import Database

if TYPE_CHECKING:
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
        self.store = KnowledgeStore(database)
        self.sources = sources
        self._kb: KnowledgeBase | None = None
        self._building = asyncio.Lock()
        self._direct = DirectIntake(self.base)
        self.intake: KnowledgeIntake = self._direct  # the seam a job-based intake replaces
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
            from core.knowledge.service import Scope

            return await self._kb.remove(document_id, Scope(scope))
        return await self.store.remove(document_id, scope)

    async def hits(self, scope: str, query: str, top_k: int | None = None) -> list[Hit]:
        """The best passages among `scope`'s and the global documents ([] with none)."""
        if not await self._has_documents(scope):
            return []
        from core.knowledge.service import Scope

        kb = await self.base()
        return await kb.search(query, Scope(scope), top_k or self.settings.top_k)

    async def search_text(self, scope: str, query: str) -> str:
        from core.knowledge.retrieval import hits_text

        return hits_text(await self.hits(scope, query), self._defuse)

    async def _has_documents(self, scope: str) -> bool:
        scopes = [GLOBAL_SCOPE] if scope == GLOBAL_SCOPE else [scope, GLOBAL_SCOPE]
        counts = await self.store.fingerprint(scopes)
        return any(entry[0] for entry in counts.values())

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

    async def _tool_search(self, platform: str, chat_id: str, query: str) -> str:
        from core.knowledge.render import render_for_context

        hits = await self.hits(f"{platform}:{chat_id}", query)
        return render_for_context(hits, max_tokens=self.settings.max_context_tokens)

    def add_tool(self, registry: ToolRegistry) -> None:
        """`[Knowledge: query]` / the native `knowledge` function, scoped to the chat."""
        registry.register(knowledge_tool(self._tool_search))
        self._defuse = registry.defuse_markers

    def add_commands(self, commands: Commands, admins: frozenset[str]) -> None:
        command = KbCommand(self, admins, group_members_add=self.settings.group_members_add)
        commands.add("kb", command)

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
