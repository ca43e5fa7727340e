"""`KnowledgeBase`: add, list, remove and search documents, scoped to a chat or global.

Why one service: chat commands, the console, the CLI and the turn's retrieval must
agree on every rule (scopes, limits, duplicates, what a hit is), so they all call this.
Why search still answers while the embedder is away: keyword search needs no model; a
failed or changing embedder lowers search to keyword-only instead of to nothing.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.knowledge.chunking import Passage, chunk_pages, text_pages
from core.knowledge.embedders import Embedder, EmbeddingError
from core.knowledge.fusion import fuse
from core.knowledge.scope import Scope
from core.knowledge.segment import index_terms, query_terms
from core.knowledge.settings import KnowledgeSettings
from core.knowledge.vectors import VectorIndex
from core.media.documents import Page
from memory.knowledge.store import KnowledgeStore, TooManyDocuments
from memory.knowledge.types import (
    GLOBAL_SCOPE,
    ChunkDraft,
    DocumentDraft,
    DocumentInfo,
    KnowledgeRefused,
)

log = logging.getLogger(__name__)

CANDIDATES = 50  # from each of keyword and vector search, before fusion
# Keyword hits scoring under this share of the best one matched only a stray common term;
# fused by rank they would push the vector search's best passage out of the top k.
KEYWORD_FLOOR = 0.25
REEMBED_BATCH = 64
# A document of more passages is made searchable by keyword first and embedded by
# `reembed` afterwards, so nobody waits for a long embedding to find its words
# (docs/knowledge.md has the timings).
EMBED_INLINE_MAX = 64

__all__ = ["Added", "DocumentInfo", "Hit", "KnowledgeBase", "KnowledgeRefused", "Scope"]


@dataclass(frozen=True)
class Added:
    document: DocumentInfo
    duplicate: bool  # the same text was already in this scope: nothing new was stored
    embedded: bool  # False: searchable by keyword now, by meaning after `reembed`


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    document_id: int
    source: str
    locator: str
    text: str
    score: float  # the fused score (reciprocal rank fusion)
    keyword_rank: int | None
    vector_rank: int | None
    keyword_score: float | None
    vector_score: float | None  # cosine similarity

    @property
    def label(self) -> str:
        """`handbook.pdf · p. 12`, `rules.md · "Bans"`, or the source alone."""
        return f"{self.source} · {self.locator}" if self.locator else self.source


def _vector_bytes(row: np.ndarray) -> bytes:
    return np.ascontiguousarray(row, dtype=np.float32).tobytes()


class KnowledgeBase:
    """The knowledge base over its store and an embedder (loaded on first use)."""

    def __init__(
        self, store: KnowledgeStore, embedder: Embedder, settings: KnowledgeSettings
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._settings = settings
        self._vectors = VectorIndex(store, embedder.model_id)

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    # -- adding -----------------------------------------------------------------------

    async def add(
        self,
        content: str | Sequence[Page],
        source: str,
        scope: Scope,
        *,
        added_by: str = "",
        embed: bool | None = None,
    ) -> Added:
        """Index a text (Markdown is cut at its headings) or parsed pages, all or nothing.

        `embed`: embed the passages before the document becomes searchable (True), or make
        it searchable by keyword now and leave the vectors to `reembed` (False); None
        embeds inline up to EMBED_INLINE_MAX passages. KnowledgeRefused (nothing stored)
        over a limit or for an empty document.
        """
        pages = text_pages(content, source) if isinstance(content, str) else list(content)
        pages = [p for p in pages if p.text.strip()]
        whole = "\n".join(p.text for p in pages)
        size = len(whole.encode("utf-8"))
        limits = self._settings
        if not whole.strip():
            raise KnowledgeRefused("the document has no text to index")
        if size > limits.max_bytes:
            raise KnowledgeRefused(
                f"the document's text is {size} bytes, more than [knowledge] max_bytes "
                f"({limits.max_bytes})"
            )
        passages = chunk_pages(pages, limits.chunk_tokens, limits.chunk_overlap)
        if len(passages) > limits.max_chunks:
            raise KnowledgeRefused(
                f"the document makes {len(passages)} passages, more than [knowledge] "
                f"max_chunks ({limits.max_chunks})"
            )
        digest = hashlib.sha256(" ".join(whole.split()).encode("utf-8")).hexdigest()
        draft = DocumentDraft(
            scope=scope.key,
            source=source,
            content_hash=digest,
            size_bytes=size,
            pages=[{"text": p.text, "locator": p.locator} for p in pages],
            added_by=added_by,
        )
        try:
            info, created = await self._store.begin(draft, max_documents=limits.max_documents)
        except TooManyDocuments as full:
            raise KnowledgeRefused(
                f"this chat already has {full.limit} documents, the most it may have "
                "([knowledge] max_documents); remove one first"
            ) from None
        if not created:
            return Added(info, duplicate=True, embedded=info.state == "ready")
        if embed is None:
            embed = len(passages) <= EMBED_INLINE_MAX
        return await self._index(info, passages, embed)

    async def _index(self, info: DocumentInfo, passages: Sequence[Passage], embed: bool) -> Added:
        try:
            vectors: np.ndarray | None = None
            try:
                if embed:
                    vectors = await self._embedder.embed_passages([p.text for p in passages])
            except EmbeddingError as exc:
                log.warning(
                    "knowledge: document %d indexed by keyword only (%s); vectors follow "
                    "when the embedder works",
                    info.id,
                    exc,
                )
            chunks = [
                ChunkDraft(
                    ordinal=p.ordinal,
                    locator=p.locator,
                    text=p.text,
                    terms=index_terms(p.text),
                    vector=_vector_bytes(vectors[i]) if vectors is not None else None,
                )
                for i, p in enumerate(passages)
            ]
            dim = int(vectors.shape[1]) if vectors is not None and vectors.ndim == 2 else 0
            await self._store.finish(info.id, chunks, model=self._embedder.model_id, dim=dim)
        except Exception as exc:
            await self._store.fail(info.id, f"indexing failed: {type(exc).__name__}")
            raise
        done = await self._store.get(info.id)
        assert done is not None
        return Added(done, duplicate=False, embedded=vectors is not None)

    async def resume(self, document_id: int | None = None) -> builtins.list[Added]:
        """Finish documents a stopped process accepted but never indexed (for the runner):
        every such document, or only `document_id` (an ingestion job tried again)."""
        finished: list[Added] = []
        for info, pages in await self._store.unfinished():
            if document_id is not None and info.id != document_id:
                continue
            parts = [Page(p.get("text", ""), p.get("locator", "")) for p in pages]
            passages = chunk_pages(parts, self._settings.chunk_tokens, self._settings.chunk_overlap)
            finished.append(await self._index(info, passages, len(passages) <= EMBED_INLINE_MAX))
        return finished

    # -- listing and removing -------------------------------------------------------------

    async def list(self, scope: Scope) -> list[DocumentInfo]:
        return await self._store.documents([scope.key])

    async def remove(self, document_id: int, scope: Scope) -> DocumentInfo | None:
        """Remove a document of `scope` (another scope's id is not found)."""
        gone = await self._store.remove(document_id, scope.key)
        if gone is not None:
            self._vectors.forget(scope.key)
        return gone

    # -- searching ------------------------------------------------------------------------

    @staticmethod
    def scopes_for(chat: Scope | None) -> builtins.list[str]:
        """What a turn in `chat` may see: its own documents and the global ones."""
        if chat is None or chat.is_global:
            return [GLOBAL_SCOPE]
        return [chat.key, GLOBAL_SCOPE]

    async def search(
        self, query: str, chat: Scope | None, top_k: int | None = None
    ) -> builtins.list[Hit]:
        """The best passages for `query` among `chat`'s and the global documents."""
        limit = top_k or self._settings.top_k
        scopes = self.scopes_for(chat)
        keyword = await self._store.keyword(scopes, query_terms(query), CANDIDATES)
        if keyword:
            floor = keyword[0][1] * KEYWORD_FLOOR
            keyword = [(cid, score) for cid, score in keyword if score >= floor]
        vector: list[tuple[int, float]] = []
        try:
            asked = await self._embedder.embed_query(query)
            vector = await self._vectors.search(scopes, asked, CANDIDATES)
        except EmbeddingError as exc:
            log.warning("knowledge: searching by keyword only (%s)", exc)
        fused = fuse(keyword, vector, limit)
        stored = await self._store.chunks([f.chunk_id for f in fused])
        hits: list[Hit] = []
        for f in fused:
            chunk = stored.get(f.chunk_id)
            if chunk is None:  # removed since the ranking was made
                continue
            hits.append(
                Hit(
                    chunk.id,
                    chunk.document_id,
                    chunk.source,
                    chunk.locator,
                    chunk.text,
                    f.score,
                    f.keyword_rank,
                    f.vector_rank,
                    f.keyword_score,
                    f.vector_score,
                )
            )
        return hits

    # -- a changed model -----------------------------------------------------------------

    async def reembed(self, batch: int = REEMBED_BATCH) -> int:
        """Embed every passage that has no vector by the current model, a batch at a time,
        then drop other models' vectors. Search answers throughout (keyword for what is
        not embedded yet). Run it in the background at start; returns how many it embedded.
        """
        model = self._embedder.model_id
        done = 0
        while True:
            todo = await self._store.without_vector(model, batch)
            if not todo:
                break
            rows = await self._embedder.embed_passages([text for _, _, text in todo])
            dim = int(rows.shape[1])
            pairs = [(cid, _vector_bytes(rows[i])) for i, (cid, _, _) in enumerate(todo)]
            done += await self._store.add_vectors(model, dim, pairs)
            if len(todo) < batch:
                break
        await self._store.drop_other_models(model)
        return done

    async def close(self) -> None:
        await self._embedder.close()
