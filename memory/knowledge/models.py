"""The knowledge base's tables: documents, their passages, and the passages' vectors.

The knowledge base is an engine of its own (core/knowledge/, memory/knowledge/store.py);
memory/schema.py gathers every domain's tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base, BigIdKey, owned_by
from memory.db.rows import AUTHOR_LEN, ID_LEN, KIND_LEN, NAME_LEN, PLATFORM_LEN, UTCDateTime, utcnow

# -- the knowledge base (migration 0012) --

KNOWLEDGE_STATES = ("pending", "indexing", "ready", "failed")
SCOPE_LEN = PLATFORM_LEN + 1 + ID_LEN  # "platform:chat_id", 161
HASH_LEN = 64  # sha256, hex
# The keyword index: on SQLite the FTS5 table `knowledge_fts` (made by migration 0012,
# outside these models: a virtual table has no ORM shape); on PostgreSQL a tsvector
# column of the chunk under a GIN index. Both index the pre-segmented `terms`.
KNOWLEDGE_FTS = "knowledge_fts"
TermsVector = Text().with_variant(TSVECTOR(), "postgresql")


class KnowledgeDocumentRow(BigIdKey, Base):
    """One document in one scope (a chat's "platform:chat_id", or "global").

    `state` is how far ingestion got: `indexing` from the moment it is accepted (the
    parsed `pages` kept here so a restarted process can finish or retry it), `ready` in
    the one transaction that writes all its chunks and vectors, `failed` with `error`.
    Unique on (scope, content hash): the same text twice in one scope is one document.
    """

    __tablename__ = "knowledge_documents"
    __table_args__ = (
        UniqueConstraint("scope", "content_hash"),
        Index("ix_knowledge_documents_scope_state", "scope", "state"),
        {"sqlite_autoincrement": True},
    )

    scope: Mapped[str] = mapped_column(String(SCOPE_LEN))
    source: Mapped[str] = mapped_column(String(NAME_LEN))
    content_hash: Mapped[str] = mapped_column(String(HASH_LEN))
    size_bytes: Mapped[int] = mapped_column(Integer)
    pages: Mapped[list[Any]] = mapped_column(JSON, default=list)
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    added_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class KnowledgeChunkRow(BigIdKey, Base):
    """One passage of a ready document. Chunks exist only while their document is ready:
    written in the transaction that makes it so, deleted in the one that removes it."""

    __tablename__ = "knowledge_chunks"
    __table_args__ = (
        Index("ix_knowledge_chunks_document_id", "document_id", "ordinal"),
        Index("ix_knowledge_chunks_scope", "scope"),
        Index("ix_knowledge_chunks_terms_vector", "terms_vector", postgresql_using="gin"),
        {"sqlite_autoincrement": True},
    )

    document_id: Mapped[int] = owned_by("knowledge_documents.id")
    scope: Mapped[str] = mapped_column(String(SCOPE_LEN))
    ordinal: Mapped[int] = mapped_column(Integer)
    locator: Mapped[str] = mapped_column(String(NAME_LEN), default="")
    text: Mapped[str] = mapped_column(Text)
    terms: Mapped[str] = mapped_column(Text)
    terms_vector: Mapped[Any] = mapped_column(TermsVector, nullable=True)


class KnowledgeVectorRow(Base):
    """A chunk's embedding by one model: float32 bytes, with the model and dimension that
    made them, so a changed model is re-embedded instead of compared with the old."""

    __tablename__ = "knowledge_vectors"
    __table_args__ = (Index("ix_knowledge_vectors_scope_model", "scope", "model"),)

    chunk_id: Mapped[int] = owned_by("knowledge_chunks.id", primary_key=True)
    model: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    scope: Mapped[str] = mapped_column(String(SCOPE_LEN))
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
