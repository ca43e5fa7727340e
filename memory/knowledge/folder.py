"""The knowledge folder's documents, across scopes: what `added_by` says a file added.

Why a query of its own: at start the folder watcher (core/knowledge/folder.py) compares
the files with what the knowledge base holds for them, including files deleted (or whole
chat subfolders removed) while the daemon was down, whose scopes the folder no longer
names. Every other read of the knowledge tables is per scope (memory/knowledge/store.py).
"""

from __future__ import annotations

from sqlalchemy import select

from memory.db.migrate import Database
from memory.knowledge.models import KnowledgeDocumentRow
from memory.knowledge.types import DocumentInfo

_COLUMNS = tuple(getattr(KnowledgeDocumentRow, n) for n in DocumentInfo.__dataclass_fields__)


class KnowledgeFolderDocuments:
    """Documents by the start of their `added_by` ("folder:"), in id order."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def by_author_prefix(self, prefix: str, limit: int | None = None) -> list[DocumentInfo]:
        """`prefix` "" lists every document (the console), the oldest `limit` first."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            select(*_COLUMNS)
            .where(KnowledgeDocumentRow.added_by.like(escaped + "%", escape="\\"))
            .order_by(KnowledgeDocumentRow.id)
            .limit(limit)
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [DocumentInfo(*row) for row in rows]
