"""The table of long-term memory: one row per fact about one user."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base
from memory.db.rows import AUTHOR_LEN, UTCDateTime, utcnow


class MemoryRow(Base):
    """A long-term fact about one user; content_hash makes duplicates impossible."""

    __tablename__ = "memories"
    __table_args__ = (
        UniqueConstraint("user_id", "content_hash"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    author: Mapped[str] = mapped_column(String(AUTHOR_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
