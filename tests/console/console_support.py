"""The real daemon with the web console on, for the console's HTTP and browser tests."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import insert

from bot.config import Settings
from bot.wiring.app import App
from channels.http.channel import HttpChannel
from memory.turns.store import SqlStorage
from memory.usage.models import UsageRow
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import daemon, settings_for

PASSWORD = "correct horse battery"
HOSTILE = '<script>alert(1)</script>"onerror=alert(2) <img src=x onerror=alert(3)>'
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def console_settings(
    tmp_path: Path, database_url: str, model: FakeOpenAI, **sections: dict[str, Any]
) -> Settings:
    """The daemon on the fakes (tests/rig.py) with its HTTP server and the web console on."""
    own: dict[str, dict[str, Any]] = {
        "http": {"enabled": True, "host": "127.0.0.1", "port": 0},
        "web": {"password": PASSWORD},
    }
    for name, values in sections.items():
        own[name] = {**own.get(name, {}), **values}
    return settings_for(tmp_path, database_url, model, **own)


@dataclass
class Running:
    app: App
    base: str  # http://127.0.0.1:port


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Running]:
    async with daemon(settings) as app:
        http = next(c for c in app.channels if isinstance(c, HttpChannel))
        yield Running(app, f"http://127.0.0.1:{http.port}")


def client(**options: Any) -> aiohttp.ClientSession:
    """A browser-like client: keeps cookies for 127.0.0.1, never follows redirects itself."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), **options)


def form_token(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def sign_in(session: aiohttp.ClientSession, base: str, password: str = PASSWORD) -> str:
    """Sign in through the form; returns the session's CSRF token (from the overview)."""
    async with session.get(f"{base}/console/sign-in") as page:
        token = form_token(await page.text())
    data = {"csrf": token, "password": password, "next": ""}
    async with session.post(f"{base}/console/sign-in", data=data, allow_redirects=False) as done:
        assert done.status == 303, await done.text()
    async with session.get(f"{base}/console/", allow_redirects=False) as overview:
        assert overview.status == 200
        return form_token(await overview.text())


async def add_usage(storage: SqlStorage, rows: list[dict[str, Any]]) -> None:
    """Token usage rows as the usage recorder writes them (one per key and day)."""
    defaults = {"user_id": "u", "model": "chat-model", "purpose": "reply", "calls": 1}
    full = [{"estimated_calls": 0, **defaults, **row} for row in rows]
    await storage.database.write(lambda conn: conn.execute(insert(UsageRow), full))
