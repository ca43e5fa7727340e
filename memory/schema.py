"""The whole schema: every table family's models, gathered for Alembic's autogenerate and
the schema test (tests/memory/test_storage.py), which compare the migrations with `Base.metadata`.

Why a module of its own: the stores import only the table family they use; whatever needs
every table imports this.
"""

from __future__ import annotations

import memory.digest.models  # noqa: F401 (registers its tables on Base.metadata)
import memory.jobs.models  # noqa: F401 (registers its tables on Base.metadata)
import memory.knowledge.models  # noqa: F401 (registers its tables on Base.metadata)
import memory.leases.models  # noqa: F401 (registers its tables on Base.metadata)
import memory.moderation.models  # noqa: F401 (registers its tables on Base.metadata)
import memory.reminders.models  # noqa: F401 (registers its tables on Base.metadata)
from memory.db.base import Base
from memory.knowledge.models import KNOWLEDGE_FTS

__all__ = ["Base", "described_by_models"]


def described_by_models(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's `include_name`: False for the FTS5 table and its shadow tables, which the
    migrations make and these models cannot describe (autogenerate and the schema test
    compare everything else)."""
    return not (type_ == "table" and (name or "").startswith(KNOWLEDGE_FTS))
