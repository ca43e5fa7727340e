"""Issue 24, the HTTP side: the real daemon (App with its HTTP server and console) on
loopback, attacked the way the issue's report did. Each test failed before its fix.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from channels.http.guard import KnownHosts
from channels.http.request import scoped_message_id
from memory.chats.types import ChatKey
from tests.console.console_support import Running, client, console_settings, running, sign_in
from tests.fakes.openai_server import FakeOpenAI, last_user_text

ADMIN = "ops"


def answer_what_was_said(body: dict[str, Any]) -> str:
    """The model repeats the last user message, so a reply shows which message it answers."""
    return "answer: " + (last_user_text(body) or "").split("]: ", 1)[-1]


# served by conftest.py's `model` fixture
FAKE_CHAT = {
    "reply": answer_what_was_said,
    "model": "fake-model",
}


@pytest.fixture
async def daemon(tmp_path: Path, database_url: str, model: FakeOpenAI) -> AsyncIterator[Running]:
    settings = console_settings(
        tmp_path, database_url, model, bot={"admins": [f"http:{ADMIN}"], "rate_limit_per_min": 0}
    )
    async with running(settings) as run:
        yield run


async def post(
    session: aiohttp.ClientSession, run: Running, body: Any, **headers: str
) -> tuple[int, Any]:
    sent = {"Content-Type": "application/json", **headers}
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    async with session.post(f"{run.base}/v1/chat", data=data, headers=sent) as response:
        return response.status, await response.json()


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# -- 1. cross-site requests ------------------------------------------------------------


async def test_a_web_page_cannot_drive_the_api(daemon: Running) -> None:
    """A page in the operator's browser posts an admin command as text/plain (no CORS
    preflight) or with its own Origin: refused, and the command never runs."""
    storage = daemon.app.storage
    assert storage is not None
    await storage.add_memory("http", "x2", "likes green tea", "test")
    command = {"user_id": ADMIN, "chat_type": "private", "text": "/memory clear http:x2 confirm"}
    async with aiohttp.ClientSession() as session:
        status, body = await post(session, daemon, command, **{"Content-Type": "text/plain"})
        assert status == 415 and "application/json" in body["error"]
        status, body = await post(session, daemon, command, Origin="http://evil.example")
        assert status == 403 and "another site" in body["error"]
        status, body = await post(session, daemon, command, **{"Sec-Fetch-Site": "cross-site"})
        assert status == 403
        assert [m.content for m in await storage.list_memories("http", "x2")] == ["likes green tea"]
        # An integration (no Origin, JSON) still works, and so does a page of this server.
        own = daemon.base
        status, body = await post(session, daemon, command, Origin=own)
        assert status == 200 and "forgot 1" in body["reply"]


async def test_json_labelled_multipart_is_415_like_any_other_type(
    daemon: Running, model: FakeOpenAI
) -> None:
    """Issue 44 item 6: the body is never parsed as a form on the JSON API (it was a 400
    'malformed multipart body'); a real form there is 415 too, and nothing is run."""
    command = {"user_id": ADMIN, "chat_type": "private", "text": "hello"}
    form = "multipart/form-data; boundary=x"
    real_form = b'--x\r\nContent-Disposition: form-data; name="text"\r\n\r\nhello\r\n--x--\r\n'
    async with aiohttp.ClientSession() as session:
        for body in (command, real_form):
            status, answer = await post(session, daemon, body, **{"Content-Type": form})
            assert status == 415 and "application/json" in answer["error"]
    assert model.requests == []


async def test_a_rebinding_page_cannot_drive_the_api_or_the_console(daemon: Running) -> None:
    """Issue 35.3: a page on rebind.example whose name now resolves to 127.0.0.1 is "same
    origin" with the daemon as far as the browser knows (Origin and Host both name it).
    Its requests are refused by the name it uses; integrations using a DNS name (no
    Origin, no Sec-Fetch-*) and the operator's own browser on 127.0.0.1 still work."""
    storage = daemon.app.storage
    assert storage is not None
    await storage.add_memory("http", "x2", "likes green tea", "test")
    command = {"user_id": ADMIN, "chat_type": "private", "text": "/memory clear http:x2 confirm"}
    port = daemon.base.rsplit(":", 1)[1]
    rebound = f"rebind.example:{port}"
    browser = {"Host": rebound, "Origin": f"http://{rebound}", "Sec-Fetch-Site": "same-origin"}
    async with aiohttp.ClientSession() as session:
        status, body = await post(session, daemon, command, **browser)
        assert status == 403 and "DNS rebinding" in body["error"]
        head = {"Host": rebound, "Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}
        async with session.get(f"{daemon.base}/console/sign-in", headers=head) as page:
            assert page.status == 403
        assert [m.content for m in await storage.list_memories("http", "x2")] == ["likes green tea"]
        hello = {"user_id": "app", "chat_type": "private", "text": "hi"}
        status, _ = await post(session, daemon, hello, Host=f"chatterd:{port}")  # an integration
        assert status == 200
        own = {"Origin": daemon.base, "Sec-Fetch-Site": "same-origin"}
        status, _ = await post(session, daemon, hello, **own)
        assert status == 200
        local = {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
        status, _ = await post(session, daemon, hello, **{**own, **local})
        assert status == 200


def test_known_hosts_follow_the_bound_address_and_public_url() -> None:
    loopback = KnownHosts.of("127.0.0.1")
    assert all(loopback.accepts(h) for h in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080"))
    assert not loopback.accepts("rebind.example:8080") and not loopback.accepts("10.0.0.5:8080")
    everywhere = KnownHosts.of("0.0.0.0")
    assert everywhere.accepts("10.0.0.5:8080") and not everywhere.accepts("rebind.example")
    proxied = KnownHosts.of("127.0.0.1", "https://Bot.Example.org/")
    assert proxied.accepts("bot.example.org") and proxied.accepts("bot.example.org.:443")
    assert not proxied.accepts("example.org")


# -- 4. the dedup key is (user, chat, message id) ----------------------------------------


async def test_a_reused_message_id_of_another_user_is_his_own_message(
    daemon: Running, model: FakeOpenAI
) -> None:
    group = {"chat_type": "group", "chat_id": "team", "mentions_bot": True, "message_id": "m1"}
    async with aiohttp.ClientSession() as session:
        status, alice = await post(
            session, daemon, {**group, "user_id": "alice", "text": "alice asks about the plan"}
        )
        assert status == 200 and alice["reply"] == "answer: alice asks about the plan"
        status, bob = await post(
            session, daemon, {**group, "user_id": "bob", "text": "bob asks about lunch"}
        )
        assert status == 200 and bob["reply"] == "answer: bob asks about lunch"
        # Alice's own retry is still a repeat: her first answer, no new model call.
        status, again = await post(
            session, daemon, {**group, "user_id": "alice", "text": "alice asks about the plan"}
        )
        assert (status, again["reply"]) == (200, alice["reply"])
    assert len(model.requests) == 2


# -- 5. a private chat belongs to one person (threads: tests/channels/test_http_threads.py) -----


async def test_a_private_chat_cannot_be_named_by_someone_else(
    daemon: Running, model: FakeOpenAI
) -> None:
    secret = "my locker code is 4711"
    async with aiohttp.ClientSession() as session:
        status, _ = await post(
            session, daemon, {"user_id": "alice", "chat_type": "private", "text": secret}
        )
        assert status == 200
        bob = {"user_id": "bob", "text": "what did alice say?"}
        status, body = await post(
            session, daemon, {**bob, "chat_type": "private", "chat_id": "alice"}
        )
        assert status == 403 and "belongs to another user" in body["error"]
        # A group may be called "alice": it is a chat of its own, never hers (issue 35.6).
        status, body = await post(
            session,
            daemon,
            {**bob, "chat_type": "group", "chat_id": "alice", "mentions_bot": True},
        )
        assert status == 200
        # Bob's own private chat works; Alice's history never reached his model requests.
        status, body = await post(session, daemon, {**bob, "chat_type": "private"})
        assert status == 200
    assert len(model.requests) == 3
    assert all(secret not in json.dumps(r["messages"]) for r in model.requests[1:])


# -- 12. crafted input is a 400, never a 500 ---------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"user_id": ' + "7" * 5000 + ', "chat_type": "private", "text": "hi"}',
        '{"user_id": "u", "chat_type": "private", "text": "hi", "message_id": ' + "9" * 200 + "}",
    ],
)
async def test_huge_numbers_are_400(
    daemon: Running, raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with aiohttp.ClientSession() as session:
        status, body = await post(session, daemon, raw)
    assert status == 400 and "error" in body
    assert errors_logged(caplog) == []


async def test_crafted_console_urls_are_400_pages(
    daemon: Running, caplog: pytest.LogCaptureFixture
) -> None:
    async with aiohttp.ClientSession() as session:
        status, _ = await post(
            session, daemon, {"user_id": "ann", "chat_type": "private", "text": "hello"}
        )
        assert status == 200
    crafted = [
        "/console/chat?platform=http&id=ann&before=%C2%B2",  # "²" passes isdigit()
        "/console/chat?platform=http&id=ann&before=" + "9" * 30,
        "/console/chats?after=" + "9" * 30,
        "/console/chats?after=2024-01-01T00:00:00~%C2%B2",
        "/console/people?after=" + "9" * 30,
        "/console/people?after=%C2%B2",
        "/console/settings?after=%C2%B2",
        "/console/settings?after=" + "9" * 30,
    ]
    async with client() as session:
        await sign_in(session, daemon.base)
        for path in crafted:
            async with session.get(daemon.base + path, allow_redirects=False) as page:
                text = await page.text()
                assert page.status == 400, (path, page.status, text[:300])
                assert page.content_type == "text/html" and "Bad request" in text
    assert errors_logged(caplog) == []


async def test_crlf_in_the_sign_in_target_is_a_400_page(
    daemon: Running, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.console.console_support import PASSWORD, form_token

    target = "/console/\r\nSet-Cookie: evil=1"
    async with client() as session:
        async with session.get(f"{daemon.base}/console/sign-in") as page:
            token = form_token(await page.text())
        data = {"csrf": token, "password": PASSWORD, "next": target}
        async with session.post(
            f"{daemon.base}/console/sign-in", data=data, allow_redirects=False
        ) as done:
            assert done.status == 400 and "Bad request" in await done.text()
            assert "evil" not in done.headers.get("Set-Cookie", "")
        async with session.get(
            f"{daemon.base}/console/sign-in", params={"next": target}, allow_redirects=False
        ) as page:
            assert page.status == 400
        # A good target still works.
        async with session.get(f"{daemon.base}/console/sign-in") as page:
            token = form_token(await page.text())
        data = {"csrf": token, "password": PASSWORD, "next": "/console/chats"}
        async with session.post(
            f"{daemon.base}/console/sign-in", data=data, allow_redirects=False
        ) as done:
            assert done.status == 303 and done.headers["Location"] == "/console/chats"
    assert errors_logged(caplog) == []


# -- 2. overload: turned away, never half-accepted ---------------------------------------


async def test_past_the_waiting_line_http_is_told_to_come_back(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    settings = console_settings(
        tmp_path,
        database_url,
        model,
        bot={"max_in_flight": 1, "max_waiting": 1, "rate_limit_per_min": 0},
    )
    async with running(settings) as run, aiohttp.ClientSession() as session:
        model.pause()

        def say(n: int) -> dict[str, Any]:
            name = f"p{n}"
            return {"user_id": name, "chat_type": "private", "text": name, "message_id": "1"}

        first = asyncio.create_task(post(session, run, say(1)))  # in flight (model paused)
        await model.wait_for_requests(1, timeout_s=15)
        second = asyncio.create_task(post(session, run, say(2)))  # waits for a place
        for _ in range(200):
            if run.app.processor is not None and run.app.processor.is_busy(ChatKey("http", "p2")):
                break
            await asyncio.sleep(0.02)
        async with session.post(
            f"{run.base}/v1/chat", json=say(3), headers={"Content-Type": "application/json"}
        ) as refused:
            assert refused.status == 503 and int(refused.headers["Retry-After"]) > 0
            assert "send it again" in (await refused.json())["error"]
        storage = run.app.storage
        assert storage is not None
        assert await storage.intake.by_message("http", "p3", scoped_message_id("p3", "1")) is None
        model.resume()
        assert [(await first)[1]["reply"], (await second)[1]["reply"]] == [
            "answer: p1",
            "answer: p2",
        ]
        assert await post(session, run, say(3)) == (200, {"reply": "answer: p3", "private": False})
