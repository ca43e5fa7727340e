"""The digest's marks and the feeds' tables (migration 0015)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base, BigIdKey, owned_by
from memory.db.rows import AUTHOR_LEN, ID_LEN, KIND_LEN, PLATFORM_LEN, UTCDateTime, utcnow

URL_LEN = 2048
ENTRY_KEY_LEN = 64  # a hash of the entry's id (or link, or title)
ENTRY_STATES = ("seen", "pending", "posted")


class DigestMarkRow(BigIdKey, Base):
    """Where a chat's last digest stopped: the next one recaps what came after."""

    __tablename__ = "digest_marks"
    __table_args__ = (UniqueConstraint("platform", "chat_id"), {"sqlite_autoincrement": True})

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    through_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class FeedRow(BigIdKey, Base):
    """A feed one chat follows. `next_poll_at` is also the poll's claim: the process whose
    conditional UPDATE moves it on polls the feed (memory/digest/store.py)."""

    __tablename__ = "feeds"
    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "url"),
        Index("ix_feeds_due", "next_poll_at"),
        {"sqlite_autoincrement": True},
    )

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    chat_type: Mapped[str] = mapped_column(String(KIND_LEN))
    thread_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    url: Mapped[str] = mapped_column(String(URL_LEN))
    title: Mapped[str] = mapped_column(Text)
    added_by: Mapped[str] = mapped_column(String(AUTHOR_LEN))
    etag: Mapped[str | None] = mapped_column(Text)
    last_modified: Mapped[str | None] = mapped_column(Text)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    failure_told: Mapped[bool] = mapped_column(Boolean, default=False)
    next_poll_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class FeedEntryRow(BigIdKey, Base):
    """An entry of a feed, once per feed (the unique key): a restart never posts it again."""

    __tablename__ = "feed_entries"
    __table_args__ = (
        UniqueConstraint("feed_id", "entry_key"),
        Index("ix_feed_entries_state", "feed_id", "state"),
        {"sqlite_autoincrement": True},
    )

    feed_id: Mapped[int] = owned_by("feeds.id")
    entry_key: Mapped[str] = mapped_column(String(ENTRY_KEY_LEN))
    title: Mapped[str] = mapped_column(Text)
    link: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
