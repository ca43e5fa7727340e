"""Following feeds (`/sub`): add, list, remove, and the poll that posts new entries.

Rules, once, for the command and the console: a feed is fetched only through the safe
fetcher (core/media/fetch.py: private addresses refused unless `[links] allow_hosts`
names them, on every hop; size and time bounded), so an address that is refused is
refused at `/sub add` before anything is stored. At subscription the feed's entries are
stored `seen`: nothing old is posted. Each poll is conditional (ETag, Last-Modified) and
claimed by one process (memory/digest/store.py); a new entry is stored before it is
sent, sent once through the one door, and marked. A feed that keeps failing is said once
in the chat (until it works again) and polled less and less often.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from core.feeds.parse import NotAFeed, ParsedFeed, parse_feed
from core.media.fetch import Downloaded, DownloadError, DownloadRefused
from core.messages import DeliveryError, InboundMessage, OutboundMessage, Sent, message_to
from memory.digest.types import EntryDraft, Feed, FeedDraft, FeedOverLimit

if TYPE_CHECKING:
    from memory.digest.store import DigestStore

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
Send = Callable[[OutboundMessage], Awaitable[Sent]]
FEED_TYPES = ("application/", "text/xml", "text/plain", "text/json")
LISTED = 50
MAX_URL = 2000  # the feeds table keeps at most 2048


class Fetcher(Protocol):
    async def fetch(
        self,
        url: str,
        *,
        accept: tuple[str, ...] = (),
        max_bytes: int | None = None,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> Downloaded: ...


@dataclass(frozen=True)
class FeedLimits:
    """`[subscriptions]`: how often, how many, how large, how patient."""

    poll_s: float = 900.0
    max_per_chat: int = 20
    max_bytes: int = 2 * 1024 * 1024
    tell_after: int = 3  # failed polls in a row before the chat is told (once)
    backoff_max_s: float = 6 * 3600.0
    per_poll: int = 10  # new entries posted per feed per poll (the rest wait their turn)
    tick_s: float = 5.0


def _drafts(parsed: ParsedFeed) -> list[EntryDraft]:
    """Oldest first (feeds list newest first), so entries are stored and posted in order."""
    return [EntryDraft(e.key, e.title, e.link) for e in reversed(parsed.entries)]


def entry_text(feed: Feed, title: str, link: str) -> str:
    name = feed.title or feed.url
    return f"📰 {name}: {title}" + (f"\n{link}" if link else "")


class Feeds:
    """Subscriptions of every chat; `run(stop)` polls them (`tick()` is one pass)."""

    def __init__(
        self,
        store: DigestStore,
        fetcher: Fetcher,
        send: Send,
        *,
        limits: FeedLimits | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self._fetcher = fetcher
        self._send = send
        self.limits = limits or FeedLimits()
        self._clock = clock or (lambda: datetime.now(UTC))

    def _now(self) -> datetime:
        return self._clock().astimezone(UTC)

    async def _read(
        self, url: str, feed: Feed | None = None
    ) -> tuple[Downloaded, ParsedFeed | None]:
        got = await self._fetcher.fetch(
            url,
            accept=FEED_TYPES,
            max_bytes=self.limits.max_bytes,
            if_none_match=feed.etag if feed is not None else None,
            if_modified_since=feed.last_modified if feed is not None else None,
        )
        if got.not_modified:
            return got, None
        return got, parse_feed(got.data, got.content_type)

    async def add(self, message: InboundMessage, url: str) -> str:
        """One line: followed (with how many entries are taken as already seen) or why not."""
        url = url.strip()
        if len(url) > MAX_URL:
            return f"Not added: the address is longer than {MAX_URL} characters."
        here = await self.store.feeds_of(message.platform, message.chat_id)
        if any(feed.url == url for feed in here):
            return "This chat follows that feed already (/sub list)."
        if len(here) >= self.limits.max_per_chat:
            return self._over(self.limits.max_per_chat)
        try:
            got, parsed = await self._read(url)
        except DownloadRefused as exc:
            return f"Not added: {exc}."
        except DownloadError as exc:
            return f"Not added: it could not be fetched ({exc})."
        except NotAFeed as exc:
            return f"Not added: {exc}."
        assert parsed is not None
        draft = FeedDraft(
            platform=message.platform,
            chat_id=message.chat_id,
            chat_type=message.chat_type.value,
            url=url,
            title=parsed.title,
            added_by=message.sender_key,
            etag=got.etag,
            last_modified=got.last_modified,
            thread_id=message.thread_id,
        )
        first = self._now() + timedelta(seconds=self.limits.poll_s)
        try:
            feed = await self.store.add_feed(
                draft, _drafts(parsed), first_poll_at=first, max_per_chat=self.limits.max_per_chat
            )
        except FeedOverLimit as over:
            return self._over(over.limit)
        if feed is None:
            return "This chat follows that feed already (/sub list)."
        log.info("feeds: #%d %s followed in %s by %s", feed.id, url, feed.chat_key, draft.added_by)
        name = feed.title or url
        return (
            f"📰 #{feed.id} followed: {name} ({len(parsed.entries)} entries now, taken as "
            "read; new ones are posted here). /sub remove "
            f"{feed.id} stops it."
        )

    @staticmethod
    def _over(limit: int) -> str:
        return (
            f"Not added: this chat follows {limit} feeds, the most a chat may "
            "([subscriptions] max_per_chat); remove one first."
        )

    async def listing(self, platform: str, chat_id: str) -> str:
        feeds = await self.store.feeds_of(platform, chat_id)
        if not feeds:
            return "This chat follows no feeds. /sub add <url> follows one (admins)."
        lines = ["Feeds this chat follows:"]
        for feed in feeds[:LISTED]:
            note = f" (failing: {feed.failures} polls)" if feed.failures else ""
            lines.append(f"#{feed.id} {feed.title or '(untitled)'} — {feed.url}{note}")
        return "\n".join(lines)

    async def remove(self, platform: str, chat_id: str, feed_id: int) -> str:
        if not await self.store.remove_feed(platform, chat_id, feed_id):
            return f"This chat follows no feed #{feed_id} (/sub list)."
        return f"Stopped following #{feed_id}."

    async def tick(self) -> int:
        """Poll the feeds that are due; returns how many entries were posted."""
        posted = 0
        for feed in await self.store.due_feeds(self._now(), 50):
            try:
                posted += await self._poll(feed)
            except Exception:  # one feed's failure must not stop the others
                log.exception("feeds: polling #%d failed", feed.id)
        return posted

    async def _poll(self, feed: Feed) -> int:
        now = self._now()
        # The claim holds the feed until a poll's worth of time: a process killed mid-poll
        # leaves it to the next one then.
        if not await self.store.claim_poll(feed, now + timedelta(seconds=self.limits.poll_s)):
            return 0  # another replica polls it
        try:
            got, parsed = await self._read(feed.url, feed)
        except (DownloadError, NotAFeed) as exc:
            await self._failed(feed, str(exc), now)
            return 0
        entries = _drafts(parsed) if parsed is not None else []
        fresh = await self.store.polled(
            feed.id,
            entries,
            etag=got.etag,
            last_modified=got.last_modified,
            next_poll_at=now + timedelta(seconds=self.limits.poll_s),
        )
        if fresh:
            log.info("feeds: #%d has %d new entr%s", feed.id, fresh, "y" if fresh == 1 else "ies")
        return await self._post_pending(feed)

    async def _post_pending(self, feed: Feed) -> int:
        """Send what is stored `pending` (new now, or left by a process that died)."""
        posted = 0
        for entry in await self.store.pending(feed.id, self.limits.per_poll):
            outbound = message_to(
                feed,
                entry_text(feed, entry.title, entry.link),
                plain=True,
                occurrence_id=f"feed:{feed.id}:{entry.id}",  # the same on a resend
            )
            try:
                await self._send(outbound)
            except DeliveryError as exc:
                log.warning("feeds: #%d's entry not delivered yet (%s)", feed.id, exc)
                break  # in order: the rest wait for the next poll
            # <- the one-write window: sent, not yet marked (as reminders and jobs)
            await self.store.posted(entry.id)
            posted += 1
        return posted

    async def _failed(self, feed: Feed, why: str, now: datetime) -> None:
        failures = feed.failures + 1
        wait = min(self.limits.poll_s * 2 ** min(failures - 1, 16), self.limits.backoff_max_s)
        wait = max(wait, self.limits.poll_s)
        await self.store.poll_failed(
            feed.id, failures=failures, next_poll_at=now + timedelta(seconds=wait)
        )
        log.warning("feeds: #%d %s failed (%d in a row): %s", feed.id, feed.url, failures, why)
        if failures < self.limits.tell_after or feed.failure_told:
            return
        if not await self.store.failure_told(feed.id):
            return  # told already (by another process)
        text = (
            f"📰 Feed #{feed.id} ({feed.title or feed.url}) keeps failing: {why}. "
            "I keep trying, less often; /sub remove "
            f"{feed.id} stops it."
        )
        try:
            await self._send(
                message_to(feed, text, plain=True, occurrence_id=f"feed:{feed.id}:failing")
            )
        except DeliveryError as exc:
            log.warning("feeds: #%d's failure notice not delivered (%s)", feed.id, exc)

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until `stop` is set. Never raises."""
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("feeds: a pass failed; trying again")
            try:
                await asyncio.wait_for(stop.wait(), self.limits.tick_s)
            except TimeoutError:
                pass
