"""Digest marks and feeds as the core sees them: plain dataclasses, no SQLAlchemy.

Why apart from memory/digest/store.py: the core (core/digest/, core/feeds/) reads these
types, and importing the core must not load a storage implementation (the store is a seam).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory.chats.types import ChatKey
from memory.db.rows import OverLimit


class FeedOverLimit(OverLimit):
    """A feed not added: the chat already follows `limit` feeds (core/feeds/service.py
    words it)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"chat already follows {limit} feeds", limit)


@dataclass(frozen=True)
class FeedDraft:
    """A feed about to be followed, with the validators of its first fetch."""

    platform: str
    chat_id: str
    chat_type: str
    url: str
    title: str
    added_by: str
    etag: str | None = None
    last_modified: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True)
class Feed:
    id: int
    platform: str
    chat_id: str
    chat_type: str
    thread_id: str | None
    url: str
    title: str
    added_by: str
    etag: str | None
    last_modified: str | None
    failures: int  # polls failed in a row (0: the last one worked)
    failure_told: bool  # the chat was told it keeps failing (told once, until it works)
    next_poll_at: datetime
    created_at: datetime

    @property
    def chat_key(self) -> ChatKey:
        return ChatKey(self.platform, self.chat_id)


@dataclass(frozen=True)
class FeedEntry:
    """An entry of a feed: `seen` at subscription, `pending` until posted, `posted`."""

    id: int
    feed_id: int
    entry_key: str
    title: str
    link: str
    state: str


@dataclass(frozen=True)
class EntryDraft:
    """An entry as read from the feed: its stable key (a hash), title and link."""

    key: str
    title: str
    link: str
