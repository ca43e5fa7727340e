"""Feeds a chat follows, on the real store and the real safe fetcher against a feed served
on loopback: nothing old posted, each new entry once, conditional polls, a refused address
never fetched, a failing feed said once, RSS, Atom and JSON Feed read."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from core.feeds.service import FeedLimits, Feeds
from core.media.fetch import DownloadPolicy, SafeDownloader
from core.messages import ChatType, InboundMessage, OutboundMessage, Sent
from memory.digest.store import DigestStore
from memory.turns.store import SqlStorage
from tests.digest.support import FeedServer, now, rss
from tests.fakes.manual_clock import ManualWallClock


class Chat:
    """The one door out as these tests see it: what was sent, in order."""

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, outbound: OutboundMessage) -> Sent:
        self.sent.append(outbound)
        return Sent()

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.sent]


def asked(text: str = "/sub add") -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id="-100900",
        chat_type=ChatType.GROUP,
        sender_id="1000",
        sender_name="Ada",
        text=text,
    )


def feeds_on(
    storage: SqlStorage, chat: Chat, clock: ManualWallClock, allow: tuple[str, ...] = ("127.0.0.1",)
) -> Feeds:
    fetcher = SafeDownloader(
        DownloadPolicy(max_bytes=1 << 20, timeout_s=5, allow_private_hosts=allow)
    )
    limits = FeedLimits(poll_s=60, max_per_chat=2, tell_after=2, backoff_max_s=600)
    return Feeds(DigestStore(storage.database), fetcher, chat.send, limits=limits, clock=clock)


async def test_old_entries_are_not_posted_and_each_new_one_once(storage: SqlStorage) -> None:
    clock, chat = ManualWallClock(now()), Chat()
    async with FeedServer() as server:
        server.body = rss(("b", "Second"), ("a", "First"))
        feeds = feeds_on(storage, chat, clock)
        added = await feeds.add(asked(), server.url)
        assert added.startswith("📰 #1 followed: Club news (2 entries now, taken as read")
        assert await feeds.tick() == 0 and chat.sent == []  # not due yet
        clock.advance(seconds=61)
        assert await feeds.tick() == 0 and chat.sent == []  # unchanged: a 304
        assert server.conditional == 1
        server.body = rss(("d", "Fourth"), ("c", "Third"), ("b", "Second"), ("a", "First"))
        clock.advance(seconds=61)
        assert await feeds.tick() == 2
        assert chat.texts == [
            "📰 Club news: Third\nhttp://example.org/c",
            "📰 Club news: Fourth\nhttp://example.org/d",
        ]
        assert all(m.chat_id == "-100900" and m.plain for m in chat.sent)
        for _ in range(3):  # more polls of the same body: nothing twice
            clock.advance(seconds=61)
            await feeds.tick()
        assert len(chat.sent) == 2
        listed = await feeds.listing("telegram", "-100900")
        assert f"#1 Club news — {server.url}" in listed
        assert await feeds.add(asked(), server.url) == (
            "This chat follows that feed already (/sub list)."
        )
        assert await feeds.remove("telegram", "-100900", 1) == "Stopped following #1."
        assert "follows no feeds" in await feeds.listing("telegram", "-100900")


async def test_a_private_address_is_refused_at_add_with_no_fetch(storage: SqlStorage) -> None:
    clock, chat = ManualWallClock(now()), Chat()
    async with FeedServer() as server:
        server.body = rss(("a", "First"))
        feeds = feeds_on(storage, chat, clock, allow=())
        refused = await feeds.add(asked(), server.url)
        assert refused.startswith("Not added:") and "not a public address" in refused
        assert server.requests == 0
        refused = await feeds.add(asked(), "file:///etc/passwd")
        assert refused.startswith("Not added:") and server.requests == 0
        refused = await feeds.add(asked(), server.url + "?" + "x" * 2000)
        assert refused.startswith("Not added: the address is longer") and server.requests == 0
    assert await DigestStore(storage.database).feeds_of("telegram", "-100900") == []


async def test_a_failing_feed_is_said_once_and_retried_with_backoff(storage: SqlStorage) -> None:
    clock, chat = ManualWallClock(now()), Chat()
    store = DigestStore(storage.database)
    async with FeedServer() as server:
        server.body = rss(("a", "First"))
        feeds = feeds_on(storage, chat, clock)
        await feeds.add(asked(), server.url)
        server.status = 500
        waits = []
        for _ in range(5):
            (feed,) = await store.feeds_of("telegram", "-100900")
            clock.now = feed.next_poll_at + timedelta(seconds=1)
            await feeds.tick()
            (after,) = await store.feeds_of("telegram", "-100900")
            waits.append((after.next_poll_at - clock.now).total_seconds())
        notices = [t for t in chat.texts if "keeps failing" in t]
        assert len(notices) == 1 and "HTTP 500" in notices[0]
        assert waits[0] < waits[1] < waits[2] <= 600  # backing off, up to the cap
        server.status = 200  # it works again: the next failure run is told again
        server.body = rss(("b", "Back"), ("a", "First"))
        (feed,) = await store.feeds_of("telegram", "-100900")
        clock.now = feed.next_poll_at + timedelta(seconds=1)
        assert await feeds.tick() == 1
        assert chat.texts[-1] == "📰 Club news: Back\nhttp://example.org/b"
        (feed,) = await store.feeds_of("telegram", "-100900")
        assert feed.failures == 0 and not feed.failure_told


async def test_at_most_max_per_chat_feeds(storage: SqlStorage) -> None:
    clock, chat = ManualWallClock(now()), Chat()
    async with FeedServer() as one, FeedServer() as two, FeedServer() as three:
        for server in (one, two, three):
            server.body = rss(("a", "First"))
        feeds = feeds_on(storage, chat, clock)
        assert (await feeds.add(asked(), one.url)).startswith("📰 #1")
        assert (await feeds.add(asked(), two.url)).startswith("📰 #2")
        over = await feeds.add(asked(), three.url)
        assert "max_per_chat" in over and three.requests == 0


ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom club</title><id>urn:club</id>
<updated>2026-12-01T00:00:00Z</updated>
%s</feed>"""


def atom(*ids: str) -> bytes:
    entries = "".join(
        f'<entry><id>urn:{i}</id><title>Atom {i}</title><link href="http://example.org/{i}"/>'
        "<updated>2026-12-01T00:00:00Z</updated></entry>"
        for i in ids
    )
    return ATOM % entries.encode()


def json_feed(*ids: str) -> bytes:
    items: list[dict[str, Any]] = [
        {"id": i, "title": f"Json {i}", "url": f"http://example.org/{i}"} for i in ids
    ]
    body = {"version": "https://jsonfeed.org/version/1.1", "title": "Json club", "items": items}
    return json.dumps(body).encode()


async def test_atom_and_json_feed_are_read(storage: SqlStorage) -> None:
    clock, chat = ManualWallClock(now()), Chat()
    async with FeedServer() as a, FeedServer() as j:
        a.body, a.content_type = atom("1"), "application/atom+xml"
        j.body, j.content_type = json_feed("1"), "application/feed+json"
        feeds = feeds_on(storage, chat, clock)
        assert "Atom club" in await feeds.add(asked(), a.url)
        assert "Json club" in await feeds.add(asked(), j.url)
        a.body, j.body = atom("2", "1"), json_feed("2", "1")
        clock.advance(seconds=61)
        assert await feeds.tick() == 2
    assert sorted(chat.texts) == [
        "📰 Atom club: Atom 2\nhttp://example.org/2",
        "📰 Json club: Json 2\nhttp://example.org/2",
    ]


async def test_a_page_that_is_no_feed_is_not_added(storage: SqlStorage) -> None:
    clock, chat = ManualWallClock(now()), Chat()
    async with FeedServer() as server:
        server.body, server.content_type = b"<html><body>hello</body></html>", "text/html"
        feeds = feeds_on(storage, chat, clock)
        refused = await feeds.add(asked(), server.url)
    assert refused.startswith("Not added:")


async def test_two_pollers_on_one_database_post_each_entry_once(storage: SqlStorage) -> None:
    """Replicas: each poll is claimed by one of them (a conditional write on the feed)."""
    clock, chat = ManualWallClock(now()), Chat()
    async with FeedServer() as server:
        server.body = rss(("a", "First"))
        one, two = feeds_on(storage, chat, clock), feeds_on(storage, chat, clock)
        await one.add(asked(), server.url)
        for n in range(2, 6):
            items = [(chr(ord("a") + k), f"Entry {k}") for k in range(n)]
            server.body = rss(*reversed(items))
            clock.advance(seconds=61)
            await asyncio.gather(one.tick(), two.tick())
    assert chat.texts == [
        f"📰 Club news: Entry {k}\nhttp://example.org/{chr(97 + k)}" for k in range(1, 5)
    ]
