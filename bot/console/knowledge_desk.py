"""What the console's Knowledge page works through, apart from the page itself.

Why a module of its own: the console's shared page dependencies (`bot/console/page.py`)
name this desk, and the page module imports page.py; keeping the desk here keeps the
two from importing each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.knowledge.ingest import JobIntake
    from core.knowledge.reading import PageReader
    from memory.knowledge.folder import KnowledgeFolderDocuments
    from memory.knowledge.types import DocumentInfo

FORM_SLACK = 64 * 1024  # the multipart form around the file


@dataclass(frozen=True)
class KnowledgeDesk:
    """What the page works through: the listing (no model loaded), the removal `/kb
    remove` uses, the intake of "kb_add" jobs, the reader, and the knowledge folder."""

    listing: KnowledgeFolderDocuments
    remove: Callable[[int, str], Awaitable[DocumentInfo | None]]  # (id, scope): /kb remove's
    intake: JobIntake
    reader: PageReader
    max_bytes: int  # a file's size ([documents] max_bytes)
    folder: Path | None = None

    @property
    def upload_limit(self) -> int:
        """The upload request's body: the file and its form."""
        return self.max_bytes + FORM_SLACK
