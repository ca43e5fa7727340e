"""The knowledge base as the core sees it: drafts, stored documents and passages, the
refusal (no SQLAlchemy)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory.db.rows import OverLimit

GLOBAL_SCOPE = "global"  # documents every chat's turns search


class KnowledgeRefused(ValueError):
    """Refused before anything was stored; str(exc) is one line naming the limit."""


class TooManyDocuments(OverLimit):
    """A document the store did not accept: its scope already holds `limit` documents
    (core/knowledge/service.py words it)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the scope already holds {limit} documents", limit)


@dataclass(frozen=True)
class DocumentDraft:
    scope: str
    source: str
    content_hash: str
    size_bytes: int
    pages: list[dict[str, str]]
    added_by: str


@dataclass(frozen=True)
class DocumentInfo:
    id: int
    scope: str
    source: str
    content_hash: str
    size_bytes: int
    state: str
    chunk_count: int
    error: str
    added_by: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ChunkDraft:
    ordinal: int
    locator: str
    text: str
    terms: str
    vector: bytes | None  # float32 bytes by the finishing model, or None (embed later)


@dataclass(frozen=True)
class StoredChunk:
    id: int
    document_id: int
    scope: str
    source: str
    locator: str
    text: str
