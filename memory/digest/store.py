"""The digest's marks and the followed feeds in the database.

Why the poll is a conditional write: with several replicas looking at the same due feed,
exactly one may poll it. `claim_poll` is `UPDATE feeds SET next_poll_at = <later> WHERE
id = ? AND next_poll_at = <as read>` (one winner on SQLite and PostgreSQL); the winner
stores the entries it found as `pending` (unique per feed, so an entry is stored once
however often it is read), sends them and marks each `posted`. A process killed in
between leaves `pending` rows that the next poll's winner sends: nothing is lost, and a
`posted` entry is never sent again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, delete, func, insert, select, update

from memory.db.migrate import Database
from memory.db.records import Records
from memory.db.rows import check_key, clean_text, refuse_over, utcnow
from memory.digest.models import DigestMarkRow, FeedEntryRow, FeedRow
from memory.digest.types import EntryDraft, Feed, FeedDraft, FeedEntry, FeedOverLimit

__all__ = ["DigestStore", "EntryDraft", "Feed", "FeedDraft", "FeedEntry", "FeedOverLimit"]

_FEEDS = Records(FeedRow, Feed)
_ENTRIES = Records(FeedEntryRow, FeedEntry)
TITLE_MAX = 500
LINK_MAX = 2000


def _entry_values(feed_id: int, entry: EntryDraft, state: str) -> dict[str, object]:
    return {
        "feed_id": feed_id,
        "entry_key": entry.key,
        "title": clean_text(entry.title)[:TITLE_MAX],
        "link": clean_text(entry.link)[:LINK_MAX],
        "state": state,
        "created_at": utcnow(),
    }


def _new_only(conn: Connection, feed_id: int, entries: Sequence[EntryDraft]) -> list[EntryDraft]:
    """`entries` not stored for this feed yet, each key once."""
    keys = [entry.key for entry in entries]
    known = set(
        conn.execute(
            select(FeedEntryRow.entry_key).where(
                FeedEntryRow.feed_id == feed_id, FeedEntryRow.entry_key.in_(keys)
            )
        ).scalars()
    )
    fresh: dict[str, EntryDraft] = {}
    for entry in entries:
        if entry.key not in known and entry.key not in fresh:
            fresh[entry.key] = entry
    return list(fresh.values())


class DigestStore:
    """Marks, feeds and entries over a `Database`; each method is one transaction or read."""

    def __init__(self, database: Database) -> None:
        self._db = database

    # -- the digest's marks --

    async def mark(self, platform: str, chat_id: str) -> datetime | None:
        """Where this chat's last digest stopped (None: never had one)."""
        query = select(DigestMarkRow.through_at).where(
            DigestMarkRow.platform == platform, DigestMarkRow.chat_id == chat_id
        )
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    async def set_mark(self, platform: str, chat_id: str, through_at: datetime) -> None:
        check_key("digest chat", platform, chat_id)
        where = (DigestMarkRow.platform == platform, DigestMarkRow.chat_id == chat_id)

        def write(conn: Connection) -> None:
            now = utcnow()
            done = conn.execute(
                update(DigestMarkRow).where(*where).values(through_at=through_at, updated_at=now)
            )
            if not done.rowcount:
                conn.execute(
                    insert(DigestMarkRow).values(
                        platform=platform, chat_id=chat_id, through_at=through_at, updated_at=now
                    )
                )

        await self._db.write(write)

    # -- feeds --

    async def add_feed(
        self,
        draft: FeedDraft,
        seen: Sequence[EntryDraft],
        *,
        first_poll_at: datetime,
        max_per_chat: int,
    ) -> Feed | None:
        """Follow a feed with its current entries marked `seen` (never posted); None
        when this chat follows that URL already; FeedOverLimit (nothing stored)."""
        check_key("feed chat", draft.platform, draft.chat_id)
        here = select(func.count()).where(
            FeedRow.platform == draft.platform, FeedRow.chat_id == draft.chat_id
        )
        same = select(FeedRow.id).where(
            FeedRow.platform == draft.platform,
            FeedRow.chat_id == draft.chat_id,
            FeedRow.url == draft.url,
        )

        def write(conn: Connection) -> int | None:
            if conn.execute(same).first() is not None:
                return None
            refuse_over(conn, here, FeedOverLimit(max_per_chat))
            found = conn.execute(
                insert(FeedRow)
                .values(
                    platform=draft.platform,
                    chat_id=draft.chat_id,
                    chat_type=draft.chat_type,
                    thread_id=draft.thread_id,
                    url=draft.url,
                    title=clean_text(draft.title)[:TITLE_MAX],
                    added_by=draft.added_by[:200],
                    etag=draft.etag,
                    last_modified=draft.last_modified,
                    failures=0,
                    failure_told=False,
                    next_poll_at=first_poll_at,
                    created_at=utcnow(),
                )
                .returning(FeedRow.id)
            )
            feed_id = int(found.scalar_one())
            fresh = _new_only(conn, feed_id, seen)
            if fresh:
                conn.execute(
                    insert(FeedEntryRow), [_entry_values(feed_id, e, "seen") for e in fresh]
                )
            return feed_id

        feed_id = await self._db.write(write)
        return None if feed_id is None else await _FEEDS.written(self._db, feed_id)

    async def feeds_of(self, platform: str, chat_id: str) -> list[Feed]:
        query = (
            _FEEDS.select()
            .where(FeedRow.platform == platform, FeedRow.chat_id == chat_id)
            .order_by(FeedRow.id)
        )
        return await _FEEDS.all(self._db, query)

    async def all_feeds(self, limit: int = 500) -> list[Feed]:
        return await _FEEDS.all(self._db, _FEEDS.select().order_by(FeedRow.id).limit(limit))

    async def feed(self, feed_id: int) -> Feed | None:
        return await _FEEDS.by_id(self._db, feed_id)

    async def remove_feed(self, platform: str, chat_id: str, feed_id: int) -> bool:
        """Stop following (this chat's feed only); its entries go with it."""
        where = (FeedRow.id == feed_id, FeedRow.platform == platform, FeedRow.chat_id == chat_id)

        def write(conn: Connection) -> bool:
            conn.execute(delete(FeedEntryRow).where(FeedEntryRow.feed_id == feed_id))
            return bool(conn.execute(delete(FeedRow).where(*where)).rowcount)

        if await self.feed(feed_id) is None:
            return False
        return await self._db.write(write)

    async def due_feeds(self, now: datetime, limit: int) -> list[Feed]:
        query = _FEEDS.select().where(FeedRow.next_poll_at <= now).order_by(FeedRow.next_poll_at)
        return await _FEEDS.all(self._db, query.limit(limit))

    async def claim_poll(self, feed: Feed, next_poll_at: datetime) -> bool:
        """Take this poll of `feed` (moving its next poll on); False: another took it."""
        query = (
            update(FeedRow)
            .where(FeedRow.id == feed.id, FeedRow.next_poll_at == feed.next_poll_at)
            .values(next_poll_at=next_poll_at)
        )
        return await self._db.write(lambda conn: bool(conn.execute(query).rowcount))

    async def polled(
        self,
        feed_id: int,
        entries: Sequence[EntryDraft],
        *,
        etag: str | None,
        last_modified: str | None,
        next_poll_at: datetime,
    ) -> int:
        """A poll that worked: the new entries stored `pending`, the validators kept, the
        failure count reset. Returns how many entries were new."""

        def write(conn: Connection) -> int:
            fresh = _new_only(conn, feed_id, entries)
            if fresh:
                conn.execute(
                    insert(FeedEntryRow), [_entry_values(feed_id, e, "pending") for e in fresh]
                )
            values: dict[str, object] = {
                "failures": 0,
                "failure_told": False,
                "next_poll_at": next_poll_at,
            }
            if etag is not None or last_modified is not None:
                values |= {"etag": etag, "last_modified": last_modified}
            conn.execute(update(FeedRow).where(FeedRow.id == feed_id).values(**values))
            return len(fresh)

        return await self._db.write(write)

    async def poll_failed(self, feed_id: int, *, failures: int, next_poll_at: datetime) -> None:
        query = (
            update(FeedRow)
            .where(FeedRow.id == feed_id)
            .values(failures=failures, next_poll_at=next_poll_at)
        )
        await self._db.write(lambda conn: conn.execute(query))

    async def failure_told(self, feed_id: int) -> bool:
        """Note that the chat was told; False when another process told it already."""
        query = (
            update(FeedRow)
            .where(FeedRow.id == feed_id, FeedRow.failure_told.is_(False))
            .values(failure_told=True)
        )
        return await self._db.write(lambda conn: bool(conn.execute(query).rowcount))

    async def pending(self, feed_id: int, limit: int) -> list[FeedEntry]:
        query = (
            _ENTRIES.select()
            .where(FeedEntryRow.feed_id == feed_id, FeedEntryRow.state == "pending")
            .order_by(FeedEntryRow.id)
            .limit(limit)
        )
        return await _ENTRIES.all(self._db, query)

    async def posted(self, entry_id: int) -> None:
        query = update(FeedEntryRow).where(FeedEntryRow.id == entry_id).values(state="posted")
        await self._db.write(lambda conn: conn.execute(query))

    async def entries(self, feed_id: int) -> list[FeedEntry]:
        query = _ENTRIES.select().where(FeedEntryRow.feed_id == feed_id).order_by(FeedEntryRow.id)
        return await _ENTRIES.all(self._db, query)
