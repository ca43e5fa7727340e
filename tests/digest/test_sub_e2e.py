"""`/sub` end to end through the fake Bot API and the fake OneBot: who may add, what the
chat is told, and a new entry of a feed served on loopback posted in the group once."""

from __future__ import annotations

from pathlib import Path

from bot.wiring.app import App
from channels.onebot.channel import OneBotChannel
from tests.console.console_support import (
    ESCAPED,
    HOSTILE,
    client,
    console_settings,
    running,
    sign_in,
)
from tests.digest.support import (
    ADMIN,
    GROUP,
    PEOPLE,
    FeedServer,
    digest_settings,
    now,
    recap_model,
    rss,
    say,
    telegram_section,
)
from tests.digest.test_digest_e2e import daemon_at
from tests.fakes.manual_clock import ManualWallClock
from tests.fakes.onebot_impl import FakeLink, FakeOneBot, sent_text
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.rig import msg

LINKS = {"allow_hosts": ["127.0.0.1"]}


async def poll(app: App) -> int:
    """One pass of the feeds' poller (its loop runs too, on real time)."""
    assert app.digest.feeds is not None
    return await app.digest.feeds.tick()


async def test_telegram_sub_add_list_remove_and_a_new_entry_posted_once(
    tmp_path: Path, database_url: str, tg: FakeTelegram
) -> None:
    clock = ManualWallClock(now())
    async with FakeOpenAI(reply=recap_model) as model, FeedServer() as feed:
        feed.body = rss(("a", "First"))
        settings = digest_settings(
            tmp_path, database_url, model, telegram=telegram_section(tg), links=LINKS
        )
        async with daemon_at(settings, clock) as app:
            refused = await say(tg, GROUP, PEOPLE[0], f"/sub add {feed.url}")
            assert refused == "Only admins can add or remove feeds; /sub list shows them."
            assert feed.requests == 0
            added = await say(tg, GROUP, ADMIN, f"/sub add {feed.url}")
            assert added.startswith("📰 #1 followed: Club news (1 entries now, taken as read")
            listed = await say(tg, GROUP, PEOPLE[0], "/sub list")
            assert f"#1 Club news — {feed.url}" in listed
            feed.body = rss(("b", "Second"), ("a", "First"))
            before = len(tg.sent)
            clock.advance(seconds=901)
            await poll(app)
            posted = await tg.wait_for("sendMessage", before + 1)
            assert posted[before].params["text"] == "📰 Club news: Second\nhttp://example.org/b"
            clock.advance(seconds=901)
            await poll(app)
            assert len(tg.sent) == before + 1
            assert await say(tg, GROUP, ADMIN, "/sub remove 1") == "Stopped following #1."
    assert model.requests == []  # feeds cost no model call


async def test_qq_group_follows_a_feed(tmp_path: Path, database_url: str) -> None:
    clock = ManualWallClock(now())
    impl = FakeOneBot(self_id=10001)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0, "access_token": "tok"}
    async with FakeOpenAI(reply=recap_model) as model, FeedServer() as feed:
        feed.body = rss(("a", "First"))
        settings = digest_settings(tmp_path, database_url, model, onebot=onebot, links=LINKS)
        try:
            async with daemon_at(settings, clock) as app:
                (channel,) = app.channels
                assert isinstance(channel, OneBotChannel)
                link: FakeLink = await impl.connect_reverse(
                    f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws", token="tok"
                )
                await link.next_action("get_login_info")
                event = impl.group_message(
                    f"/sub add {feed.url}", user_id=20001, group_id=30003, card="Ad"
                )
                await link.send_event(event)
                added = await link.next_action("send_group_msg")
                assert sent_text(added).startswith("📰 #1 followed: Club news")
                feed.body = rss(("b", "Second"), ("a", "First"))
                clock.advance(seconds=901)
                await poll(app)
                posted = await link.next_action("send_group_msg", limit_s=10)
        finally:
            await impl.close()
    assert posted["params"]["group_id"] == 30003
    assert sent_text(posted).strip() == "📰 Club news: Second\nhttp://example.org/b"


async def test_the_console_lists_feeds_and_removes_one(tmp_path: Path, database_url: str) -> None:
    async with FakeOpenAI(reply="unused") as model, FeedServer() as feed:
        title = HOSTILE.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        feed.body = rss(("a", "First")).replace(b"Club news", title.encode())
        settings = console_settings(tmp_path, database_url, model)
        settings.links.allow_hosts = ["127.0.0.1"]  # type: ignore[misc]
        async with running(settings) as daemon, client() as session:
            feeds = daemon.app.digest.feeds
            assert feeds is not None
            message = msg("", platform="qq", chat="group:30003", sender="20001", group=True)
            assert (await feeds.add(message, feed.url)).startswith("📰 #1 followed")
            token = await sign_in(session, daemon.base)
            async with session.get(f"{daemon.base}/console/feeds") as page:
                html = await page.text()
            assert "<h2>qq:group:30003</h2>" in html and feed.url in html
            assert ESCAPED in html and HOSTILE not in html
            form = {"csrf": token, "id": "1"}
            async with session.post(
                f"{daemon.base}/console/feeds/remove", data=form, allow_redirects=False
            ) as done:
                assert done.status == 303
            async with session.get(f"{daemon.base}/console/feeds") as page:
                html = await page.text()
            assert "Stopped following #1 in qq:group:30003." in html and "No feeds." in html
