"""The web console over real HTTP: the real daemon (bot.wiring.app.App) with the HTTP channel on
127.0.0.1, the fake model behind it, and aiohttp as the browser.

What an operator and an attacker would try: every page and form signed out, a wrong
password (refused and counted, then rate-limited), forms without the CSRF token, requests
from another origin, and names and messages that are HTML; plus the cookie and cache
headers a browser acts on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from yarl import URL

from bot.console import Console
from bot.console.auth import FAILURES_PER_ADDRESS
from memory.turns.types import NewTurn
from tests.console.console_support import (
    ESCAPED,
    HOSTILE,
    PASSWORD,
    Running,
    client,
    console_settings,
    running,
    sign_in,
)
from tests.fakes.openai_server import FakeOpenAI

GROUP = "room<script>"
STORED_GROUP = f"group:{GROUP}"  # HTTP groups are stored apart from private chats
USER = "u<1>"


FAKE_CHAT = {"reply": "fine, thanks"}  # served by conftest.py's `model` fixture


@pytest.fixture
async def daemon(tmp_path: Path, database_url: str, model: FakeOpenAI) -> AsyncIterator[Running]:
    async with running(console_settings(tmp_path, database_url, model)) as run:
        yield run


def q(platform: str, ident: str) -> dict[str, str]:
    return {"platform": platform, "id": ident}


GET_PAGES = [
    ("/console/", None),
    ("/console/chats", None),
    ("/console/chat", q("http", STORED_GROUP)),
    ("/console/people", None),
    ("/console/person", q("http", USER)),
    ("/console/person/export", q("http", USER)),
    ("/console/settings", None),
]
POST_FORMS = [
    ("/console/chat/settings", {**q("http", STORED_GROUP), "action": "save"}),
    ("/console/person/memory", {**q("http", USER), "action": "add", "text": "x"}),
    ("/console/sign-out", {}),
]


async def seed_hostile(run: Running) -> None:
    """A group turn through the real API (so there is a context report), a group title,
    a memory and a persona: all of them HTML an attacker chose."""
    async with client() as session:
        body = {
            "user_id": USER,
            "chat_id": GROUP,
            "chat_type": "group",
            "sender_name": HOSTILE,
            "text": HOSTILE,
            "mentions_bot": True,
        }
        async with session.post(f"{run.base}/v1/chat", json=body) as answered:
            assert answered.status == 200, await answered.text()
    storage = run.app.storage
    assert storage is not None
    title = NewTurn(
        "http", STORED_GROUP, "group", "user", "context", "hi", 1, USER, chat_title=HOSTILE
    )
    await storage.add_turn(title)
    await storage.add_memory("http", USER, HOSTILE, "http:admin")
    await storage.chat_settings.update("http", STORED_GROUP, by="test", persona=HOSTILE)


async def test_signed_out_pages_redirect_to_sign_in_and_forms_are_refused(
    daemon: Running,
) -> None:
    async with client() as session:
        for path, query in GET_PAGES:
            async with session.get(daemon.base + path, params=query, allow_redirects=False) as r:
                assert r.status == 303, path
                assert r.headers["Location"].startswith("/console/sign-in?next=%2Fconsole%2F")
                assert r.headers["Cache-Control"] == "no-store"
        for path, form in POST_FORMS:
            async with session.post(daemon.base + path, data=form, allow_redirects=False) as r:
                assert r.status == 403, path
        async with session.get(f"{daemon.base}/console", allow_redirects=False) as bare:
            assert (bare.status, bare.headers["Location"]) == (303, "/console/")


async def test_sign_in_sets_a_strict_httponly_cookie_and_pages_are_not_cached(
    daemon: Running,
) -> None:
    await seed_hostile(daemon)  # so the chat and the person exist
    async with client() as session:
        async with session.get(f"{daemon.base}/console/sign-in") as page:
            assert page.status == 200
            html = await page.text()
        assert 'type="password"' in html
        token = html.split('name="csrf" value="')[1].split('"')[0]
        form = {"csrf": token, "password": PASSWORD, "next": "/console/people"}
        url = f"{daemon.base}/console/sign-in"
        async with session.post(url, data=form, allow_redirects=False) as done:
            assert (done.status, done.headers["Location"]) == (303, "/console/people")
            cookies = SimpleCookie()
            for header in done.headers.getall("Set-Cookie"):
                cookies.load(header)
        cookie = cookies["chatterd_console"]
        assert cookie["httponly"] is True
        assert cookie["samesite"] == "Strict"
        assert cookie["path"] == "/console"
        for path, query in GET_PAGES:
            async with session.get(daemon.base + path, params=query, allow_redirects=False) as r:
                assert r.status == 200, path
                assert r.headers["Cache-Control"] == "no-store"
                assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
                assert r.headers["X-Content-Type-Options"] == "nosniff"


async def test_a_wrong_password_is_refused_counted_and_then_rate_limited(
    daemon: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with client() as session:
        for attempt in range(FAILURES_PER_ADDRESS):
            async with session.get(f"{daemon.base}/console/sign-in") as page:
                token = (await page.text()).split('name="csrf" value="')[1].split('"')[0]
            form = {"csrf": token, "password": f"guess-{attempt}", "next": ""}
            url = f"{daemon.base}/console/sign-in"
            async with session.post(url, data=form, allow_redirects=False) as refused:
                assert refused.status == 403
                assert "That password is wrong." in await refused.text()
                assert "chatterd_console=" not in refused.headers.get("Set-Cookie", "")
        # Limited now: even the right password is not tried, and the page says to wait.
        async with session.get(f"{daemon.base}/console/sign-in") as page:
            token = (await page.text()).split('name="csrf" value="')[1].split('"')[0]
        form = {"csrf": token, "password": PASSWORD, "next": ""}
        async with session.post(url, data=form, allow_redirects=False) as limited:
            assert limited.status == 429
            assert int(limited.headers["Retry-After"]) > 0
    console = _console(daemon)
    assert console.limiter.refused_total == FAILURES_PER_ADDRESS
    assert len(console.sessions) == 0
    wrong = [r for r in caplog.records if "with a wrong password" in r.getMessage()]
    assert len(wrong) == FAILURES_PER_ADDRESS
    assert not any(PASSWORD in r.getMessage() or "guess-" in r.getMessage() for r in caplog.records)


async def test_forms_without_the_csrf_token_or_from_another_origin_are_refused(
    daemon: Running,
) -> None:
    async with client() as session:
        token = await sign_in(session, daemon.base)
        add = {**q("http", USER), "action": "add", "text": "likes tea"}
        url = f"{daemon.base}/console/person/memory"
        async with session.post(url, data=add, allow_redirects=False) as missing:
            assert missing.status == 403
        async with session.post(url, data={**add, "csrf": "forged"}, allow_redirects=False) as bad:
            assert bad.status == 403
        evil = {"Origin": "http://evil.example"}
        ok = {**add, "csrf": token}
        async with session.post(url, data=ok, headers=evil, allow_redirects=False) as foreign:
            assert foreign.status == 403
        async with session.get(f"{daemon.base}/console/", headers=evil) as foreign_get:
            assert foreign_get.status == 403
        cross = {"Sec-Fetch-Site": "cross-site"}
        async with session.post(url, data=ok, headers=cross, allow_redirects=False) as site:
            assert site.status == 403
        storage = daemon.app.storage
        assert storage is not None
        assert await storage.list_memories("http", USER) == []  # nothing got through
        own = {"Origin": daemon.base}
        async with session.post(url, data=ok, headers=own, allow_redirects=False) as fine:
            assert fine.status == 303
        assert [m.content for m in await storage.list_memories("http", USER)] == ["likes tea"]
        # Even the sign-in form has its own token.
        form = {"password": PASSWORD, "next": ""}
        sign_in_url = f"{daemon.base}/console/sign-in"
        async with session.post(sign_in_url, data=form, allow_redirects=False) as no_token:
            assert no_token.status == 403


async def test_every_page_shows_hostile_names_and_messages_as_text(daemon: Running) -> None:
    await seed_hostile(daemon)
    async with client() as session:
        await sign_in(session, daemon.base)
        shown = {}
        for path, query in GET_PAGES:
            async with session.get(daemon.base + path, params=query) as page:
                assert page.status == 200, path
                body = await page.text()
            if path.endswith("/export"):
                assert page.content_type == "application/x-ndjson"
                assert json.loads(body.splitlines()[0])["content"] == HOSTILE  # data, not HTML
                continue
            assert page.content_type == "text/html"
            for raw in ("<script>alert", '"onerror=', "<img src=x"):
                assert raw not in body, f"{path} shows {raw!r} unescaped"
            shown[path] = body
    assert ESCAPED in shown["/console/chat"]  # the group's title, sender name and message
    assert "&lt;img src=x onerror=alert(3)&gt;" in shown["/console/chat"]
    assert ESCAPED in shown["/console/chats"]
    assert ESCAPED in shown["/console/person"]  # the memory
    assert "room&lt;script&gt;" in shown["/console/settings"]
    assert 'class="context-picture"' in shown["/console/chat"]
    assert "Persona: workspace." in shown["/console/chat"]  # which persona the turn used


async def test_memory_changes_use_the_memory_service_and_its_audit_line(
    daemon: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memory.memories.service")
    storage = daemon.app.storage
    assert storage is not None
    async with client() as session:
        token = await sign_in(session, daemon.base)
        url = f"{daemon.base}/console/person/memory"

        async def post(**form: str) -> str:
            data = {**q("http", USER), "csrf": token, **form}
            async with session.post(url, data=data) as page:  # follows the 303
                assert page.status == 200
                return await page.text()

        assert "Saved." in await post(action="add", text="  likes   green tea ")
        assert "Already remembered." in await post(action="add", text="Likes green TEA")
        refused = await post(action="add", text="x" * 501)
        assert "over the limit of 500" in refused
        (item,) = await storage.list_memories("http", USER)
        assert item.content == "likes green tea" and item.author.startswith("console@")
        assert "Tick the box" in await post(action="clear")
        assert "Forgotten." in await post(action="forget", memory=str(item.id))
        assert "already gone" in await post(action="forget", memory=str(item.id))
        await post(action="add", text="one")
        await post(action="add", text="two")
        assert "Forgot 2 item(s)." in await post(action="clear", confirm="yes")
    assert await storage.list_memories("http", USER) == []
    lines = [r.getMessage() for r in caplog.records if r.name == "memory.memories.service"]
    assert f"memory #{item.id} added for http:{USER} by console@127.0.0.1" in lines
    assert f"memory #{item.id} of http:{USER} forgotten by console@127.0.0.1" in lines
    assert f"2 memories of http:{USER} cleared by console@127.0.0.1" in lines


async def test_chat_settings_are_saved_and_reset_through_the_bot_commands_store(
    daemon: Running,
) -> None:
    await seed_hostile(daemon)
    storage = daemon.app.storage
    assert storage is not None
    async with client() as session:
        token = await sign_in(session, daemon.base)
        url = f"{daemon.base}/console/chat/settings"
        form = {
            **q("http", STORED_GROUP),
            "csrf": token,
            "action": "save",
            "allowed": "deny",
            "persona": "speak like a pirate",
            "wake_words": "parrot, Captain ,parrot",
        }  # "enabled" unticked: /bot off
        async with session.post(url, data=form) as saved:
            assert "Settings saved." in await saved.text()
        now = await storage.chat_settings.get("http", STORED_GROUP)
        assert (now.enabled, now.allowed, now.persona) == (False, False, "speak like a pirate")
        assert now.wake_words == ("parrot", "Captain")
        assert now.updated_by == "console@127.0.0.1"
        async with session.post(url, data={**form, "wake_words": "/cmd"}) as refused:
            assert "Not saved: a wake word cannot start with /" in await refused.text()
        reset = {**q("http", STORED_GROUP), "csrf": token, "action": "reset"}
        async with session.post(url, data=reset) as page:
            assert "back to the defaults" in await page.text()
        after = await storage.chat_settings.get("http", STORED_GROUP)
        assert (after.persona, after.wake_words, after.enabled) == ("", (), False)


async def test_sign_out_ends_the_session_for_good(daemon: Running) -> None:
    async with client() as session:
        token = await sign_in(session, daemon.base)
        cookie = session.cookie_jar.filter_cookies(URL(daemon.base + "/console/"))[
            "chatterd_console"
        ]
        url = f"{daemon.base}/console/sign-out"
        async with session.post(url, data={"csrf": token}, allow_redirects=False) as out:
            assert (out.status, out.headers["Location"]) == (303, "/console/sign-in")
    # The old cookie, replayed by someone who copied it, no longer opens anything.
    async with client(cookies={"chatterd_console": cookie.value}) as thief:
        async with thief.get(f"{daemon.base}/console/", allow_redirects=False) as page:
            assert page.status == 303


async def test_static_files_come_from_the_daemon_and_unknown_ones_are_404(
    daemon: Running,
) -> None:
    async with client() as session:
        async with session.get(f"{daemon.base}/console/static/console.css") as css:
            assert css.status == 200 and css.content_type == "text/css"
            assert "http" not in (await css.text()).replace("https://", "")  # nothing remote
        for name in ("web.py", "..%2Fweb.py", "console.css.bak"):
            async with session.get(f"{daemon.base}/console/static/{name}") as other:
                assert other.status == 404, name


async def test_without_a_password_the_console_is_off_and_the_log_says_how(
    tmp_path: Path, database_url: str, model: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.wiring.console")
    settings = console_settings(tmp_path, database_url, model, web={"password": None})
    async with running(settings) as run, client() as session:
        async with session.get(f"{run.base}/console/", allow_redirects=False) as page:
            assert page.status == 404
        async with session.get(f"{run.base}/healthz") as health:
            assert health.status == 200  # the API itself is unchanged
    assert any(
        "web console is off: set [web] password (or CHATTERD_WEB__PASSWORD)" in r.getMessage()
        for r in caplog.records
    )


def _console(run: Running) -> Console:
    assert run.app.console is not None
    return run.app.console


async def test_with_the_http_server_off_the_console_is_off_and_the_log_says_why(
    tmp_path: Path, database_url: str, model: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.rig import daemon

    caplog.set_level(logging.INFO, logger="bot.wiring.console")
    settings = console_settings(tmp_path, database_url, model, http={"enabled": False})
    async with daemon(settings) as app:
        assert app.console is None and app.channels == []
    assert any(
        "web console is off: it is served by the HTTP server; set [http] enabled = true"
        in r.getMessage()
        for r in caplog.records
    )


async def test_an_unknown_chat_or_page_is_a_plain_404_that_is_not_cached(
    daemon: Running,
) -> None:
    async with client() as session:
        await sign_in(session, daemon.base)
        async with session.get(f"{daemon.base}/console/chat", params={"platform": "x"}) as bad:
            assert bad.status == 404 and bad.headers["Cache-Control"] == "no-store"
        async with session.get(f"{daemon.base}/console/nothing-here") as missing:
            assert missing.status == 404 and missing.headers["Cache-Control"] == "no-store"
        async with session.get(
            f"{daemon.base}/console/chat", params=q("telegram", "never-seen")
        ) as unknown:
            assert unknown.status == 404
            assert "There is no chat telegram:never-seen" in await unknown.text()


async def test_switching_a_group_off_in_the_console_silences_it_at_once(
    daemon: Running, model: FakeOpenAI
) -> None:
    body = {"user_id": "u7", "chat_id": "g7", "chat_type": "group", "text": "hi",
            "mentions_bot": True}  # fmt: skip
    async with client() as session:
        async with session.post(f"{daemon.base}/v1/chat", json=body) as first:
            assert (await first.json())["reply"] == "fine, thanks"
        token = await sign_in(session, daemon.base)
        off = {**q("http", "group:g7"), "csrf": token, "action": "save", "allowed": "config"}
        async with session.post(f"{daemon.base}/console/chat/settings", data=off) as saved:
            assert "Settings saved." in await saved.text()
        asked = len(model.requests)
        async with session.post(f"{daemon.base}/v1/chat", json={**body, "text": "again"}) as r:
            assert (await r.json())["reply"] is None  # /bot off: silent, no model call
        assert len(model.requests) == asked
