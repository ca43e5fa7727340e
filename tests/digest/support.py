"""What the digest and feed tests share: the people, the settings, a model that writes a
recap only when asked for a digest, and a local feed server on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.config import Settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, user
from tests.rig import settings_for

ADMIN = user(1000, "Ada")
PEOPLE = [user(1001 + n, name) for n, name in enumerate(["Alice", "Bob", "Carol", "Dan", "Eve"])]
GROUP = group_chat(-100700, "Reading club")
RECAP = "Topics: tea and books."
DIGEST_MARK = "digest of a group chat"


def now() -> datetime:
    """The test's wall clock starts at the real time: the fake Bot API dates messages now."""
    return datetime.now(UTC).replace(microsecond=0)


def recap_model(body: dict[str, Any]) -> str:
    system = str(body["messages"][0].get("content", ""))
    return RECAP if DIGEST_MARK in system else "a plain answer"


def digest_requests(model: FakeOpenAI) -> list[str]:
    """The user content of every digest request the model saw."""
    found = []
    for request in model.requests:
        messages = request.get("messages") or []
        if messages and DIGEST_MARK in str(messages[0].get("content", "")):
            found.append(str(messages[-1]["content"]))
    return found


def telegram_section(tg: FakeTelegram) -> dict[str, Any]:
    return {"enabled": True, "token": tg.token, "api_base_url": tg.root, "poll_stall_s": 3.0}


def digest_settings(
    tmp_path: Path, database_url: str, model: FakeOpenAI, **sections: Any
) -> Settings:
    return settings_for(
        tmp_path,
        database_url,
        model,
        bot={"admins": [f"telegram:{ADMIN['id']}", "qq:20001"], "timezone": "Europe/Berlin"},
        reminders={"tick_s": 0.05},
        **sections,
    )


def command(text: str) -> list[dict[str, Any]]:
    return [entity("bot_command", text, text.split()[0])]


async def say(tg: FakeTelegram, chat: dict, who: dict, text: str) -> str:
    """Send a command and return the bot's answer."""
    before = len(tg.sent)
    tg.push_message(chat, who, text, entities=command(text))
    sent = await tg.wait_for("sendMessage", before + 1)
    return str(sent[before].params["text"])


async def until(check: Callable[[], Awaitable[bool]], within_s: float = 10.0) -> None:
    """Wait for a condition the daemon reaches on its own (stored turns, a poll)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


class FeedServer:
    """A feed on loopback whose body the test sets; counts requests and honours ETag."""

    def __init__(self) -> None:
        self.body = b""
        self.content_type = "application/rss+xml"
        self.status = 200
        self.requests = 0
        self.conditional = 0  # requests that carried If-None-Match
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/feed"

    async def _feed(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self.status != 200:
            return web.Response(status=self.status, text="down")
        etag = f'"{hash(self.body) & 0xFFFFFFFF:x}"'
        if request.headers.get("If-None-Match"):
            self.conditional += 1
            if request.headers["If-None-Match"] == etag:
                return web.Response(status=304, headers={"ETag": etag})
        return web.Response(body=self.body, content_type=self.content_type, headers={"ETag": etag})

    async def __aenter__(self) -> FeedServer:
        app = web.Application()
        app.router.add_get("/feed", self._feed)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def rss(*items: tuple[str, str]) -> bytes:
    """An RSS 2.0 body, newest item first, each (guid, title)."""
    body = "".join(
        f"<item><guid>{guid}</guid><title>{title}</title>"
        f"<link>http://example.org/{guid}</link></item>"
        for guid, title in items
    )
    return (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>Club news</title>'
        f"<link>http://example.org/</link><description>d</description>{body}</channel></rss>"
    ).encode()
