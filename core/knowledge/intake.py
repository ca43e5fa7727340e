"""The one seam every "add this to the knowledge base" goes through (`/kb add`, the CLI).

The daemon adds a chat's document as a durable job (`QueuedIntake`), the CLI indexes
right away (`DirectIntake`); the callers do not change. No numpy here: the command
module imports this at start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from core.media.documents import Page
from core.messages import InboundMessage

if TYPE_CHECKING:
    from core.knowledge.service import KnowledgeBase

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AddRequest:
    """One document to add: already read to text (or a PDF's numbered pages)."""

    scope: str  # "platform:chat_id" (e.g. "telegram:-100123", "qq:group:5") or "global"
    source: str  # the name shown in citations: a file name or a URL
    content: str | tuple[Page, ...]
    added_by: str = ""  # "platform:user_id", or "cli"
    # The message that asked (`/kb add`): a job's line goes back to its chat as a reply.
    # None (the CLI): nobody is waiting in a chat; the add happens in the call.
    origin: InboundMessage | None = None


class KnowledgeIntake(Protocol):
    async def add(self, request: AddRequest) -> str:
        """Add the document; one line saying what happened (added, duplicate, refused)."""
        ...


class DirectIntake:
    """Indexes in this call; a long document's vectors follow in a background task."""

    def __init__(self, knowledge: Callable[[], Awaitable[KnowledgeBase]]) -> None:
        self._knowledge = knowledge
        self._background: set[asyncio.Task[int]] = set()
        self._embedding = asyncio.Lock()

    async def add(self, request: AddRequest) -> str:
        from core.knowledge.service import KnowledgeRefused, Scope

        kb = await self._knowledge()
        content = request.content if isinstance(request.content, str) else list(request.content)
        try:
            added = await kb.add(
                content, request.source, Scope(request.scope), added_by=request.added_by
            )
        except KnowledgeRefused as refused:
            return f"Not added: {refused}."
        doc = added.document
        if added.duplicate:
            return f"Already in the knowledge base: #{doc.id} {doc.source} (the same text)."
        line = f"Added #{doc.id} {doc.source}: {doc.chunk_count} passage(s)"
        if not added.embedded:
            self.embed_later(kb)
            line += ", searchable by keyword now and by meaning once embedded"
        return line + "."

    def embed_later(self, kb: KnowledgeBase) -> None:
        """Embed, in the background, every passage the current model has no vector for
        (a long document, a changed `[knowledge] model`); search answers meanwhile."""
        task = asyncio.create_task(self._reembed(kb))
        self._background.add(task)
        task.add_done_callback(self._done)

    async def _reembed(self, kb: KnowledgeBase) -> int:
        async with self._embedding:  # one at a time: two would race to write one vector
            return await kb.reembed()

    def _done(self, task: asyncio.Task[int]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("knowledge: background embedding failed: %s", task.exception())

    async def settle(self) -> None:
        """Wait for the vectors still being made (the CLI, before it exits)."""
        await asyncio.gather(*self._background, return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
