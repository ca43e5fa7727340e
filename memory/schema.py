"""The whole schema: every table family's models, gathered for Alembic's autogenerate and
the schema test (tests/test_storage.py), which compare the migrations with `Base.metadata`.

Why a module of its own: the stores import only the table family they use; whatever needs
every table imports this.
"""

from __future__ import annotations

import memory.knowledge_models  # noqa: F401 (registers its tables on Base.metadata)
import memory.work_models  # noqa: F401 (registers its tables on Base.metadata)
from memory.models import Base
from memory.rows import described_by_models

__all__ = ["Base", "described_by_models"]
