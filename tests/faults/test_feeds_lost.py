"""A followed feed across SIGKILL: the real `chatterd run` process, killed mid-send.

An entry stored and at the platform's door when the process dies is posted once by the
next process; an entry that appears while nothing runs is posted once after the restart;
the entries that were there at subscription are never posted, and nothing is posted again
at the later polls. The feed is served by the test on loopback, allowed through `[links]
allow_hosts`; the count is taken from what the fake Bot API was sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.digest.support import FeedServer, rss
from tests.fakes.telegram_server import entity, group_chat
from tests.faults.test_nothing_lost import PEOPLE, Harness
from tests.faults.test_reminders_lost import until

pytestmark = pytest.mark.faults

ADMIN = PEOPLE[0]
GROUP = group_chat(-100800, "Readers")
EXTRA = {
    "CHATTERD_BOT__ADMINS": f'["telegram:{ADMIN["id"]}"]',
    "CHATTERD_LINKS__ALLOW_HOSTS": '["127.0.0.1"]',
    "CHATTERD_SUBSCRIPTIONS__POLL_S": "10",
}


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


def posts(harness: Harness) -> list[str]:
    return [
        str(s["text"])
        for s in harness.tg.sent
        if int(s["chat_id"]) == GROUP["id"] and str(s["text"]).startswith("📰 Club news:")
    ]


async def test_entries_are_posted_once_across_sigkill_and_restart(harness: Harness) -> None:
    async with FeedServer() as feed:
        feed.body = rss(("b", "Second"), ("a", "First"))
        first = await harness.daemon(EXTRA)
        text = f"/sub add {feed.url}"
        harness.tg.push_message(GROUP, ADMIN, text, entities=[entity("bot_command", text, "/sub")])
        added = await harness.tg.wait_for("sendMessage", 1, within_s=15)
        assert str(added[0].params["text"]).startswith("📰 #1 followed: Club news")
        feed.body = rss(("c", "Third"), ("b", "Second"), ("a", "First"))
        harness.tg.hold_sends()
        await harness.tg.wait_for("sendMessage", 2, within_s=30)  # Third, held at the door
        first.kill()
        await first.wait()
        harness.tg.release_sends()  # the platform never accepted it: its sender is gone
        assert posts(harness) == []
        feed.body = rss(("d", "Fourth"), ("c", "Third"), ("b", "Second"), ("a", "First"))
        second = await harness.daemon(EXTRA)
        await until(lambda: len(posts(harness)) >= 2, [first, second], 40)
        polls = feed.requests
        await until(lambda: feed.requests >= polls + 2, [second], 40)  # two more polls
        await second.terminate()
    assert posts(harness) == [
        "📰 Club news: Third\nhttp://example.org/c",
        "📰 Club news: Fourth\nhttp://example.org/d",
    ]
    assert feed.conditional >= 2  # the later polls were conditional
