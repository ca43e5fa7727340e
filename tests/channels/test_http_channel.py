"""The HTTP channel over real HTTP on 127.0.0.1, with a plain async function as the handler."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from channels.base import ChannelHealth
from channels.config import HttpConfig
from channels.http.channel import HttpChannel
from channels.http.request import MAX_TEXT_CHARS, scoped_message_id
from core.messages import ChatType, DeliveryError, InboundMessage, OutboundMessage, Reply
from tests.fakes.door import Door, start_answering

TOKEN = "s3cret-token-value"


class Recorder:
    """The handler seam: records what arrived and answers from a script."""

    def __init__(self, answer: Callable[[InboundMessage], Reply | None] | None = None) -> None:
        self.seen: list[InboundMessage] = []
        self.answer = answer or (lambda m: Reply(f"echo: {m.text}"))
        self.door = Door()  # answers go out through the channel's send(), as in the daemon

    async def __call__(self, message: InboundMessage) -> None:
        self.seen.append(message)
        await self.door.answer(message, self.answer(message))


class Harness:
    def __init__(self, channel: HttpChannel, recorder: Recorder, session: aiohttp.ClientSession):
        self.channel = channel
        self.recorder = recorder
        self.session = session
        self.health: dict[str, ChannelHealth] = {}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.channel.port}"

    async def post(
        self, body: Any, *, raw: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, Any], Mapping[str, str]]:
        data = raw if raw is not None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        async with self.session.post(f"{self.base}/v1/chat", data=data, headers=sent) as resp:
            return resp.status, await resp.json(), resp.headers


async def make_harness(token: str | None = None, **kwargs: Any) -> AsyncIterator[Harness]:
    health: dict[str, ChannelHealth] = {}
    config = HttpConfig.model_validate({"host": "127.0.0.1", "port": 0, "token": token})
    channel = HttpChannel(config, lambda: health, **kwargs)
    recorder = Recorder()
    await start_answering(channel, recorder)
    async with aiohttp.ClientSession() as session:
        harness = Harness(channel, recorder, session)
        harness.health = health
        try:
            yield harness
        finally:
            await channel.stop()


@pytest.fixture
async def http() -> AsyncIterator[Harness]:
    async for harness in make_harness(max_body_bytes=4096):
        yield harness


@pytest.fixture
async def http_with_token() -> AsyncIterator[Harness]:
    async for harness in make_harness(token=TOKEN):
        yield harness


PRIVATE = {"user_id": "u1", "chat_type": "private", "sender_name": "Ann", "text": "hello"}


async def test_private_message_round_trip(http: Harness) -> None:
    status, body, _ = await http.post({**PRIVATE, "message_id": 7})
    assert status == 200
    assert body == {"reply": "echo: hello", "private": False}
    [msg] = http.recorder.seen
    assert (msg.platform, msg.chat_id, msg.sender_id, msg.sender_name) == (
        "http",
        "u1",
        "u1",
        "Ann",
    )
    assert msg.chat_type is ChatType.PRIVATE and msg.message_id == scoped_message_id("u1", "7")
    assert msg.sender_key == "http:u1"
    assert http.channel.health().state == "running"


async def test_group_message_and_none_reply(http: Harness) -> None:
    http.recorder.answer = lambda m: None  # e.g. an untriggered group message
    group = {**PRIVATE, "chat_type": "group", "chat_id": 42, "mentions_bot": True}
    status, body, _ = await http.post(group)
    assert (status, body) == (200, {"reply": None})
    [msg] = http.recorder.seen
    assert msg.chat_type is ChatType.GROUP and msg.chat_id == "group:42" and msg.mentions_bot


async def test_sender_name_is_cleaned_and_defaults_to_user_id(http: Harness) -> None:
    await http.post({**PRIVATE, "sender_name": "\u202eevil\nname"})
    await http.post({k: v for k, v in PRIVATE.items() if k != "sender_name"})
    assert [m.sender_name for m in http.recorder.seen] == ["evil name", "u1"]


async def test_concurrent_requests_each_get_their_own_reply(http: Harness) -> None:
    results = await asyncio.gather(
        *(http.post({**PRIVATE, "user_id": f"u{i}", "text": f"m{i}"}) for i in range(20))
    )
    assert [body["reply"] for _, body, _ in results] == [f"echo: m{i}" for i in range(20)]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
    ],
)
async def test_bad_json_is_400_with_reason(http: Harness, raw: bytes, reason: str) -> None:
    status, body, _ = await http.post(None, raw=raw)
    assert status == 400 and reason in body["error"]
    assert http.recorder.seen == []


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"text": None}, "missing field: text"),
        ({"user_id": None}, "missing field: user_id"),
        ({"chat_type": None}, "missing field: chat_type"),
        ({"chat_type": "channel"}, "chat_type must be"),
        ({"chat_type": "group"}, "missing field: chat_id"),  # a group needs its chat id
        ({"text": 5}, "text must be a string"),
        ({"text": "   "}, "text is empty"),
        ({"user_id": True}, "user_id must be a string or an integer"),
        ({"user_id": 1.5}, "user_id must be a string or an integer"),
        ({"user_id": "x" * 200}, "user_id must be 1-128"),
        ({"sender_name": ["Ann"]}, "sender_name must be a string"),
        ({"mentions_bot": "yes"}, "mentions_bot must be true or false"),
        ({"chatid": "c1"}, "unknown field(s): chatid"),
    ],
)
async def test_bad_fields_are_400_with_reason(
    http: Harness, change: dict[str, Any], reason: str
) -> None:
    body_in = {k: v for k, v in {**PRIVATE, **change}.items() if v is not None}
    status, body, _ = await http.post(body_in)
    assert status == 400, body
    assert reason in body["error"]
    assert http.recorder.seen == []


async def test_huge_body_is_413(http: Harness) -> None:
    status, body, _ = await http.post({**PRIVATE, "text": "x" * 10_000})
    assert status == 413 and "4096 bytes" in body["error"]
    assert http.recorder.seen == []


async def test_huge_chunked_body_without_length_is_413(http: Harness) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b" " * 1000

    async with http.session.post(f"{http.base}/v1/chat", data=chunks()) as resp:
        assert resp.status == 413
        assert "larger than" in (await resp.json())["error"]
    assert http.recorder.seen == []


async def test_overlong_text_is_refused_clearly() -> None:
    async for harness in make_harness():
        status, body, _ = await harness.post({**PRIVATE, "text": "y" * (MAX_TEXT_CHARS + 1)})
        assert status == 413 and f"longer than {MAX_TEXT_CHARS} characters" in body["error"]
        status, _, _ = await harness.post({**PRIVATE, "text": "y" * MAX_TEXT_CHARS})
        assert status == 200


async def test_token_required_when_configured(
    http_with_token: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    h = http_with_token
    status, body, headers = await h.post(PRIVATE)
    assert status == 401 and "bearer token" in body["error"]
    assert headers["WWW-Authenticate"].startswith("Bearer")
    status, _, _ = await h.post(PRIVATE, headers={"Authorization": "Bearer wrong"})
    assert status == 401
    status, _, _ = await h.post(PRIVATE, headers={"Authorization": f"Basic {TOKEN}"})
    assert status == 401
    assert h.recorder.seen == []
    status, body, _ = await h.post(PRIVATE, headers={"Authorization": f"Bearer {TOKEN}"})
    assert (status, body["reply"]) == (200, "echo: hello")
    async with h.session.get(f"{h.base}/healthz") as resp:  # health needs no token
        assert resp.status == 200
    assert TOKEN not in caplog.text


async def test_handler_exception_is_500_without_details(
    http: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(message: InboundMessage) -> Reply:
        raise RuntimeError("db password is hunter2")

    http.recorder.answer = boom
    status, body, _ = await http.post(PRIVATE)
    assert (status, body) == (500, {"error": "internal error"})
    assert "hunter2" in caplog.text  # logged for the operator, not sent to the client


async def test_healthz_ok_and_degraded(http: Harness) -> None:
    seen = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    http.health.update(http=ChannelHealth("running", seen), telegram=ChannelHealth("running", None))
    async with http.session.get(f"{http.base}/healthz") as resp:
        assert resp.status == 200
        body = await resp.json()
        assert {key: body[key] for key in ("status", "channels")} == {
            "status": "ok",
            "channels": {
                "http": {"state": "running", "last_ok": "2025-01-02T03:04:05+00:00"},
                "telegram": {"state": "running", "last_ok": None},
            },
        }
    http.health["qq"] = ChannelHealth("reconnecting", None)
    async with http.session.get(f"{http.base}/healthz") as resp:
        body = await resp.json()
    assert body["status"] == "degraded"
    assert body["channels"]["qq"] == {"state": "reconnecting", "last_ok": None}


async def test_unknown_route_and_method_answer_json(http: Harness) -> None:
    async with http.session.get(f"{http.base}/nope") as resp:
        assert resp.status == 404 and "error" in await resp.json()
    async with http.session.get(f"{http.base}/v1/chat") as resp:
        assert resp.status == 405 and "POST" in resp.headers["Allow"]


async def test_send_is_refused_and_stop_closes_the_port() -> None:
    async for harness in make_harness():
        with pytest.raises(DeliveryError):  # nobody listens: the caller retries its request
            await harness.channel.send(OutboundMessage(platform="http", chat_id="u1", text="hi"))
        port = harness.channel.port
        await harness.channel.stop()
        assert harness.channel.health().state == "stopped"
        with pytest.raises(aiohttp.ClientConnectionError):
            async with harness.session.get(f"http://127.0.0.1:{port}/healthz"):
                pass


async def test_text_over_the_cap_is_413_and_not_stored() -> None:
    """The HTTP cap on text (16,000 characters): a clear 413, nothing handed in or stored,
    so the client can shorten it and send again (issue 24, item 11)."""
    async for harness in make_harness(max_body_bytes=1 << 20):
        status, body, _ = await harness.post({**PRIVATE, "text": "x" * 16_001})
        assert status == 413 and "16000 characters" in body["error"]
        assert harness.recorder.seen == []
