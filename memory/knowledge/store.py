"""The knowledge base's tables: documents per scope, passages, vectors, the word index.

Why ingestion is two transactions: `begin` accepts a document (refusing a duplicate or
one over the limit) and records it `indexing` with its parsed pages, before the slow
embedding; `finish` writes every passage, its index entry and its vector and flips the
document to `ready` in one transaction, on the condition that it is still `indexing`.
So a document is searchable whole or not at all, a crash between the two leaves a row a
later runner can finish from its pages, and finishing twice writes nothing twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Executable,
    String,
    bindparam,
    delete,
    func,
    insert,
    select,
    text,
    update,
)

from memory.db.migrate import Database
from memory.db.rows import AUTHOR_LEN, NAME_LEN, clean_text, refuse_over, utcnow
from memory.knowledge.models import (
    KNOWLEDGE_FTS,
    SCOPE_LEN,
    KnowledgeChunkRow,
    KnowledgeDocumentRow,
    KnowledgeVectorRow,
)
from memory.knowledge.types import (
    ChunkDraft,
    DocumentDraft,
    DocumentInfo,
    StoredChunk,
    TooManyDocuments,
)

T = TypeVar("T")
_TERM = re.compile(r"^\w+$")
# SQLite ranks every passage that holds any query term; a term in most passages adds
# little to the ranking but all of their postings to the cost. Query terms are taken
# rarest first while their passages add up to at most this many (the rarest always).
POSTINGS_BUDGET = 20_000
_LIVE = ("pending", "indexing", "ready")  # what counts towards a scope's documents


_DOC_COLUMNS = tuple(getattr(KnowledgeDocumentRow, n) for n in DocumentInfo.__dataclass_fields__)


def check_scope(scope: str) -> str:
    if not scope or len(scope) > SCOPE_LEN:
        raise ValueError(f"knowledge scope must be 1..{SCOPE_LEN} characters")
    return scope


def _clean_terms(terms: Sequence[str]) -> list[str]:
    return [t for t in terms if _TERM.match(t)]


def _rarest(conn: Connection, terms: list[str]) -> list[str]:
    """The terms that occur at all, rarest first, within POSTINGS_BUDGET (SQLite)."""
    marks = ", ".join(f":t{i}" for i in range(len(terms)))
    found = conn.execute(
        text(f"SELECT term, doc FROM {KNOWLEDGE_FTS}_vocab WHERE term IN ({marks})"),
        {f"t{i}": t for i, t in enumerate(terms)},
    ).all()
    kept: list[str] = []
    total = 0
    for term, count in sorted(found, key=lambda row: (int(row[1]), str(row[0]))):
        if kept and total + int(count) > POSTINGS_BUDGET:
            break
        kept.append(str(term))
        total += int(count)
    return kept


class KnowledgeStore:
    """The knowledge tables over a `Database`; each method is one transaction or read."""

    def __init__(self, database: Database) -> None:
        self._db = database
        # Every write through this store bumps it: a cached "does this scope have
        # documents?" (core/knowledge/presence.py) is stale once it moves.
        self.writes = 0
        self._fingerprints: dict[int, Executable] = {}

    async def _write(self, fn: Callable[[Connection], T]) -> T:
        try:
            return await self._db.write(fn)
        finally:
            self.writes += 1

    @property
    def dialect(self) -> str:
        return self._db.dialect

    # -- ingestion ------------------------------------------------------------------

    async def begin(self, draft: DocumentDraft, *, max_documents: int) -> tuple[DocumentInfo, bool]:
        """Accept a document as `indexing`: (its row, True); (the existing row, False)
        when the same content is already in the scope. TooManyDocuments over the limit."""
        check_scope(draft.scope)
        same = select(*_DOC_COLUMNS).where(
            KnowledgeDocumentRow.scope == draft.scope,
            KnowledgeDocumentRow.content_hash == draft.content_hash,
        )
        count = select(func.count()).where(
            KnowledgeDocumentRow.scope == draft.scope, KnowledgeDocumentRow.state.in_(_LIVE)
        )
        now = utcnow()

        def write(conn: Connection) -> tuple[int, bool]:
            found = conn.execute(same).first()
            if found is not None and found.state != "failed":
                return int(found.id), False
            if found is not None:  # a failed attempt at the same text: try again
                gone = delete(KnowledgeDocumentRow).where(KnowledgeDocumentRow.id == found.id)
                conn.execute(gone)
            refuse_over(conn, count, TooManyDocuments(max_documents))
            new = conn.execute(
                insert(KnowledgeDocumentRow)
                .values(
                    scope=draft.scope,
                    source=clean_text(draft.source)[:NAME_LEN],
                    content_hash=draft.content_hash,
                    size_bytes=draft.size_bytes,
                    pages=draft.pages,
                    state="indexing",
                    chunk_count=0,
                    error="",
                    added_by=clean_text(draft.added_by)[:AUTHOR_LEN],
                    created_at=now,
                    updated_at=now,
                )
                .returning(KnowledgeDocumentRow.id)
            )
            return int(new.scalar_one()), True

        doc_id, created = await self._write(write)
        info = await self.get(doc_id)
        assert info is not None
        return info, created

    async def finish(
        self, document_id: int, chunks: Sequence[ChunkDraft], *, model: str, dim: int
    ) -> bool:
        """Write every chunk (and its vector, where given) and make the document `ready`,
        in one transaction; False (nothing written) unless it was still `indexing`."""
        postgres = self.dialect == "postgresql"

        def write(conn: Connection) -> bool:
            flipped = conn.execute(
                update(KnowledgeDocumentRow)
                .where(
                    KnowledgeDocumentRow.id == document_id,
                    KnowledgeDocumentRow.state == "indexing",
                )
                .values(state="ready", chunk_count=len(chunks), error="", updated_at=utcnow())
                .returning(KnowledgeDocumentRow.scope)
            ).first()
            if flipped is None:
                return False
            scope = flipped.scope
            if not chunks:
                return True
            rows = [
                {
                    "document_id": document_id,
                    "scope": scope,
                    "ordinal": c.ordinal,
                    "locator": clean_text(c.locator)[:NAME_LEN],
                    "text": clean_text(c.text),
                    "terms": c.terms,
                }
                for c in chunks
            ]
            statement = insert(KnowledgeChunkRow).returning(
                KnowledgeChunkRow.id, sort_by_parameter_order=True
            )
            ids = [int(i) for i in conn.execute(statement, rows).scalars()]
            if postgres:
                conn.execute(
                    text(
                        "UPDATE knowledge_chunks SET terms_vector = to_tsvector('simple', terms) "
                        "WHERE document_id = :d"
                    ),
                    {"d": document_id},
                )
            else:
                conn.execute(
                    text(f"INSERT INTO {KNOWLEDGE_FTS}(rowid, terms, scope) VALUES (:i, :t, :s)"),
                    [{"i": i, "t": c.terms, "s": scope} for i, c in zip(ids, chunks, strict=True)],
                )
            vectors = [
                {"chunk_id": i, "model": model, "scope": scope, "dim": dim, "vector": c.vector}
                for i, c in zip(ids, chunks, strict=True)
                if c.vector is not None
            ]
            if vectors:
                conn.execute(insert(KnowledgeVectorRow), vectors)
            return True

        return await self._write(write)

    async def fail(self, document_id: int, error: str) -> None:
        """Mark an unfinished document failed (a finished one is left as it is)."""
        query = (
            update(KnowledgeDocumentRow)
            .where(
                KnowledgeDocumentRow.id == document_id,
                KnowledgeDocumentRow.state.in_(("pending", "indexing")),
            )
            .values(state="failed", error=clean_text(error)[:500], updated_at=utcnow())
        )
        await self._write(lambda conn: conn.execute(query))

    async def unfinished(self) -> list[tuple[DocumentInfo, list[dict[str, str]]]]:
        """Documents accepted but never finished (a crash mid-way), with their pages."""
        query = (
            select(*_DOC_COLUMNS, KnowledgeDocumentRow.pages)
            .where(KnowledgeDocumentRow.state.in_(("pending", "indexing")))
            .order_by(KnowledgeDocumentRow.id)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [(DocumentInfo(*row[:-1]), list(row[-1])) for row in rows]

    # -- documents ------------------------------------------------------------------

    async def get(self, document_id: int) -> DocumentInfo | None:
        query = select(*_DOC_COLUMNS).where(KnowledgeDocumentRow.id == document_id)
        row = await self._db.read(lambda conn: conn.execute(query).first())
        return DocumentInfo(*row) if row is not None else None

    async def documents(self, scopes: Sequence[str]) -> list[DocumentInfo]:
        query = (
            select(*_DOC_COLUMNS)
            .where(KnowledgeDocumentRow.scope.in_(list(scopes)))
            .order_by(KnowledgeDocumentRow.id)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [DocumentInfo(*row) for row in rows]

    async def remove(self, document_id: int, scope: str) -> DocumentInfo | None:
        """Delete a document of `scope` with its chunks, index entries and vectors."""
        found = await self.get(document_id)
        if found is None or found.scope != scope:
            return None
        postgres = self.dialect == "postgresql"

        def write(conn: Connection) -> bool:
            if not postgres:
                conn.execute(
                    text(
                        f"DELETE FROM {KNOWLEDGE_FTS} WHERE rowid IN "
                        "(SELECT id FROM knowledge_chunks WHERE document_id = :d)"
                    ),
                    {"d": document_id},
                )
            gone = conn.execute(
                delete(KnowledgeDocumentRow).where(
                    KnowledgeDocumentRow.id == document_id, KnowledgeDocumentRow.scope == scope
                )
            )
            return bool(gone.rowcount)

        return found if await self._write(write) else None

    # -- search ---------------------------------------------------------------------

    async def keyword(
        self, scopes: Sequence[str], terms: Sequence[str], limit: int
    ) -> list[tuple[int, float]]:
        """Chunk ids of these scopes matching any term, best first, with their scores
        (higher is better: -bm25 on SQLite, ts_rank on PostgreSQL)."""
        clean = _clean_terms(terms)
        if not clean or not scopes:
            return []
        names = {f"s{i}": s for i, s in enumerate(scopes)}
        marks = ", ".join(f":{n}" for n in names)
        if self.dialect == "postgresql":
            query = text(
                "SELECT id, ts_rank(terms_vector, q) AS score "
                "FROM knowledge_chunks, to_tsquery('simple', :q) AS q "
                f"WHERE scope IN ({marks}) AND terms_vector @@ q "
                "ORDER BY score DESC, id LIMIT :n"
            )
            match = " | ".join(f"'{t}'" for t in clean)
        else:
            query = text(
                f"SELECT rowid, -bm25({KNOWLEDGE_FTS}) AS score FROM {KNOWLEDGE_FTS} "
                f"WHERE {KNOWLEDGE_FTS} MATCH :q AND scope IN ({marks}) "
                f"ORDER BY bm25({KNOWLEDGE_FTS}) LIMIT :n"
            )
            match = " OR ".join(f'"{t}"' for t in clean)
        params: dict[str, Any] = {"q": match, "n": limit, **names}
        postgres = self.dialect == "postgresql"

        def read(conn: Connection) -> list[Any]:
            if not postgres:
                kept = _rarest(conn, clean)
                if not kept:
                    return []
                params["q"] = " OR ".join(f'"{t}"' for t in kept)
            return list(conn.execute(query, params).all())

        rows = await self._db.read(read)
        return [(int(r[0]), float(r[1])) for r in rows]

    async def fingerprint(self, scopes: Sequence[str]) -> dict[str, tuple[int, int, str]]:
        """Per scope, what changes whenever its searchable vectors may have: the number and
        id sum of ready documents and their latest update (cheap: documents, not chunks)."""
        query = self._fingerprints.get(len(scopes))
        if query is None:  # built once per number of scopes: it runs on most turns
            doc = KnowledgeDocumentRow
            named = [bindparam(f"scope_{i}", type_=String()) for i in range(len(scopes))]
            query = (
                select(doc.scope, func.count(), func.sum(doc.id), func.max(doc.updated_at))
                .where(doc.scope.in_(named), doc.state == "ready")
                .group_by(doc.scope)
            )
            self._fingerprints[len(scopes)] = query
        params = {f"scope_{i}": scope for i, scope in enumerate(scopes)}
        rows = await self._db.read(lambda conn: conn.execute(query, params).all())
        return {r[0]: (int(r[1]), int(r[2] or 0), str(r[3])) for r in rows}

    async def load_vectors(self, scope: str, model: str) -> tuple[list[int], list[bytes]]:
        """Every vector of `scope` by `model`: chunk ids and float32 bytes, id order."""
        vec = KnowledgeVectorRow
        query = (
            select(vec.chunk_id, vec.vector)
            .where(vec.scope == scope, vec.model == model)
            .order_by(vec.chunk_id)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [int(r[0]) for r in rows], [bytes(r[1]) for r in rows]

    async def chunks(self, ids: Sequence[int]) -> dict[int, StoredChunk]:
        c, d = KnowledgeChunkRow, KnowledgeDocumentRow
        query = (
            select(c.id, c.document_id, c.scope, d.source, c.locator, c.text)
            .join(d, d.id == c.document_id)
            .where(c.id.in_(list(ids)), d.state == "ready")
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return {int(r[0]): StoredChunk(*r) for r in rows}

    # -- re-embedding -----------------------------------------------------------------

    async def without_vector(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """(chunk id, scope, text) of chunks that have no vector by `model` yet."""
        c, v = KnowledgeChunkRow, KnowledgeVectorRow
        query = (
            select(c.id, c.scope, c.text)
            .outerjoin(v, (v.chunk_id == c.id) & (v.model == model))
            .where(v.chunk_id.is_(None))
            .order_by(c.id)
            .limit(limit)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [(int(r[0]), r[1], r[2]) for r in rows]

    async def add_vectors(self, model: str, dim: int, rows: Sequence[tuple[int, bytes]]) -> int:
        """Store vectors of existing chunks (a chunk removed meanwhile is skipped) and mark
        their documents updated, so every replica reloads those scopes."""
        ids = [chunk_id for chunk_id, _ in rows]

        def write(conn: Connection) -> int:
            c = KnowledgeChunkRow
            found = conn.execute(select(c.id, c.scope).where(c.id.in_(ids))).all()
            live = {int(row[0]): str(row[1]) for row in found}
            have = set(
                conn.execute(
                    select(KnowledgeVectorRow.chunk_id).where(
                        KnowledgeVectorRow.chunk_id.in_(ids), KnowledgeVectorRow.model == model
                    )
                ).scalars()
            )
            values = [
                {"chunk_id": i, "model": model, "scope": live[i], "dim": dim, "vector": blob}
                for i, blob in rows
                if i in live and i not in have
            ]
            if values:
                conn.execute(insert(KnowledgeVectorRow), values)
                docs = select(c.document_id).where(c.id.in_([v["chunk_id"] for v in values]))
                conn.execute(
                    update(KnowledgeDocumentRow)
                    .where(KnowledgeDocumentRow.id.in_(docs))
                    .values(updated_at=utcnow())
                )
            return len(values)

        return await self._write(write)

    async def drop_other_models(self, model: str) -> int:
        """Delete vectors by any model but `model` (once it covers every chunk)."""
        query = delete(KnowledgeVectorRow).where(KnowledgeVectorRow.model != model)
        return int(await self._write(lambda conn: conn.execute(query).rowcount))
