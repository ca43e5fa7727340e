"""OpenAIProvider against FakeOpenAI: real SDK, real HTTP, real retries on loopback."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import openai
import pytest
from aiohttp import web
from pydantic import SecretStr

from bot.sections import LlmConfig
from core.llm import ChatResult, LLMError, LLMProvider, provider_from_config
from tests.conftest import MakeProvider
from tests.fakes import FakeOpenAI, FakeReply, echo_last_user

KEY = "sk-test-SUPERSECRET-0123456789"
HELLO = [{"role": "user", "content": "hello there"}]

PROVIDER_DEFAULTS = {"api_key": KEY, "temperature": 0.7}  # beside conftest's make_provider


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- happy paths ----------------------------------------------------------------------


async def test_reply_text_model_and_usage(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    fake.reply("General Kenobi.", usage=(11, 3))
    result = await make_provider().chat(HELLO)
    assert result == ChatResult(
        text="General Kenobi.",
        model="test-model",
        finish_reason="stop",
        prompt_tokens=11,
        completion_tokens=3,
        tool_calls=[],
        endpoint=f"127.0.0.1:{fake.port}",
    )


async def test_request_shape(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    provider = make_provider(temperature=0.3)
    messages = [{"role": "system", "content": "be brief"}, *HELLO]
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    await provider.chat(messages)
    await provider.chat(messages, max_tokens=77, temperature=1.2, tools=tools)
    first, second = fake.requests
    assert first.path == "/v1/chat/completions"
    assert first.json == {"model": "test-model", "messages": messages, "temperature": 0.3}
    assert second["max_tokens"] == 77 and second["temperature"] == 1.2
    assert second["tools"] == tools
    assert first.headers["authorization"] == f"Bearer {KEY}"


async def test_no_key_sends_placeholder_not_the_environment(
    fake: FakeOpenAI, make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-should-not-leak")
    await make_provider(api_key=None).chat(HELLO)
    auth = fake.requests[0].headers["authorization"]
    assert auth.startswith("Bearer ") and "from-env" not in auth


async def test_tool_calls_come_back_in_openai_shape(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply_tool_calls([{"id": "call_1", "name": "search", "arguments": {"q": "weather"}}])
    result = await make_provider().chat(HELLO)
    assert result.text == "" and result.finish_reason == "tool_calls"
    assert result.tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"q": "weather"}'},
        }
    ]


async def test_default_strategy_callable(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    fake.set_default(echo_last_user)
    assert (await make_provider().chat(HELLO)).text == "echo: hello there"

    async def reply_async(body: dict) -> FakeReply:
        return FakeReply(f"{len(body['messages'])} messages", finish_reason="length")

    fake.set_default(reply_async)
    result = await make_provider().chat(HELLO)
    assert (result.text, result.finish_reason) == ("1 messages", "length")


async def test_is_an_llm_provider(make_provider: MakeProvider) -> None:
    assert isinstance(make_provider(), LLMProvider)


# -- failures -------------------------------------------------------------------------


async def test_timeout_is_quick_and_typed(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    fake.hang()
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        await make_provider(timeout_s=0.2, max_retries=0).chat(HELLO)
    assert info.value.kind == "timeout"
    assert time.monotonic() - started < 2.0


async def test_500_then_success_with_retries(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    fake.fail(500, times=2, retry_after_ms=1)
    fake.reply("finally")
    result = await make_provider(max_retries=2).chat(HELLO)
    assert result.text == "finally"
    assert len(fake.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1", "2"]


async def test_500_persisting_is_unavailable(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    fake.fail(503, times=2, retry_after_ms=1)
    with pytest.raises(LLMError) as info:
        await make_provider(max_retries=1).chat(HELLO)
    assert (info.value.kind, info.value.status) == ("unavailable", 503)


async def test_429_after_retries_is_rate_limited(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.fail(429, "Rate limit reached", times=3, retry_after_ms=1)
    with pytest.raises(LLMError) as info:
        await make_provider(max_retries=2).chat(HELLO)
    assert (info.value.kind, info.value.status) == ("rate_limited", 429)
    assert len(fake.requests) == 3 and fake.pending_script == 0


async def test_refused_connection_is_unavailable(make_provider: MakeProvider) -> None:
    provider = make_provider(base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(LLMError) as info:
        await provider.chat(HELLO)
    assert info.value.kind == "unavailable"


async def test_dropped_connection_is_unavailable(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.drop()
    with pytest.raises(LLMError) as info:
        await make_provider().chat(HELLO)
    assert info.value.kind == "unavailable"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "bad_request"),
        (401, "auth"),
        (403, "auth"),
        (404, "bad_request"),
        (422, "bad_request"),
    ],
)
async def test_client_errors_are_typed_and_hide_server_text(
    fake: FakeOpenAI, make_provider: MakeProvider, status: int, kind: str
) -> None:
    fake.fail(status, f"server says: your key {KEY} is RAW-SERVER-TEXT")
    with pytest.raises(LLMError) as info:
        await make_provider(max_retries=2).chat(HELLO)
    assert (info.value.kind, info.value.status) == (kind, status)
    assert "RAW-SERVER-TEXT" not in str(info.value)
    assert len(fake.requests) == 1  # 4xx other than 408/409/429 is not retried


JUNK = [
    web.json_response({"choices": []}),
    web.json_response({"choices": [{}]}),
    web.json_response({"choices": "nope"}),
    web.json_response({"choices": [{"message": {"content": 5}}]}),
    web.json_response([1, 2]),
    web.Response(text="<html>proxy login</html>", content_type="text/html"),
]


@pytest.mark.parametrize("junk", range(len(JUNK)))
async def test_malformed_body_is_unavailable(make_provider: MakeProvider, junk: int) -> None:
    """A server answering 200 with something that is not a chat completion."""

    async def junk_handler(request: web.Request) -> web.Response:
        body = JUNK[junk]
        return web.Response(body=body.body, status=200, content_type=body.content_type)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", junk_handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        with pytest.raises(LLMError) as info:
            await make_provider(base_url=f"http://127.0.0.1:{port}/v1").chat(HELLO)
        assert info.value.kind == "unavailable"
    finally:
        await runner.cleanup()


async def test_api_key_never_in_errors_or_logs(
    fake: FakeOpenAI, make_provider: MakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make_provider(timeout_s=0.2, max_retries=1)
    fake.fail(401, f"Incorrect API key provided: {KEY}")
    fake.fail(500, KEY, times=2, retry_after_ms=1)
    fake.fail(429, KEY, times=2, retry_after_ms=1)
    fake.hang(2)
    errors = []
    for _ in range(4):
        with pytest.raises(LLMError) as info:
            await provider.chat(HELLO)
        errors.append(info.value)
    await provider.chat(HELLO)  # a success logs too
    refused = make_provider(base_url=f"http://user:{KEY}@127.0.0.1:{free_port()}/v1")
    with pytest.raises(LLMError) as info:
        await refused.chat(HELLO)
    errors.append(info.value)
    assert [e.kind for e in errors][:4] == ["auth", "unavailable", "rate_limited", "timeout"]
    for error in errors:
        assert KEY not in str(error) and KEY not in repr(error)
        assert error.__cause__ is None and error.__suppress_context__
    assert caplog.records, "expected debug logs to inspect"
    assert KEY not in caplog.text
    assert "SUPERSECRET" not in caplog.text


# -- config ---------------------------------------------------------------------------


async def test_provider_from_config_and_overrides(fake: FakeOpenAI) -> None:
    cfg = LlmConfig(
        base_url=fake.base_url,
        api_key=SecretStr(KEY),
        model="cfg-model",
        timeout_s=3,
        max_retries=1,
        temperature=0.2,
        stream_stall_s=7,
    )
    provider = provider_from_config(cfg)
    other = provider_from_config(
        LlmConfig(), base_url_override=fake.base_url, model_override="embedded"
    )
    try:
        assert (provider.model, provider.timeout_s, provider.max_retries) == ("cfg-model", 3, 1)
        assert provider.stream_stall_s == 7
        await provider.chat(HELLO)
        await other.chat(HELLO)
        assert fake.requests[0]["temperature"] == 0.2
        assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
        assert fake.requests[1]["model"] == "embedded"
    finally:
        await provider.close()
        await other.close()


def test_default_base_url_is_openai() -> None:
    assert provider_from_config(LlmConfig()).base_url == "https://api.openai.com/v1"


# -- the fake itself (every other test relies on it) -----------------------------------


async def test_fake_models_and_request_validation(fake: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
    try:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["fake-model"]
        with pytest.raises(openai.BadRequestError):
            await client.post("/chat/completions", body={"model": "m"}, cast_to=object)
        with pytest.raises(openai.BadRequestError):
            await client.post("/chat/completions", content=b"{not json", cast_to=object)
        assert fake.requests[-1].json is None  # recorded even when unparsable
    finally:
        await client.close()


async def test_fake_latency_serves_many_concurrently(make_provider: MakeProvider) -> None:
    async with FakeOpenAI(latency_s=0.3) as slow:
        provider = make_provider(base_url=slow.base_url)
        started = time.monotonic()
        results = await asyncio.gather(*(provider.chat(HELLO) for _ in range(100)))
        elapsed = time.monotonic() - started
    assert len(results) == 100 and slow.total_requests == 100
    assert 0.3 <= elapsed < 4.0  # concurrent: nowhere near 100 * 0.3 s


async def test_fake_pause_resume_and_wait(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    provider = make_provider()
    fake.pause()
    calls = [asyncio.create_task(provider.chat(HELLO)) for _ in range(3)]
    await fake.wait_for_requests(3)
    assert fake.in_flight == 3 and not any(c.done() for c in calls)
    fake.resume()
    assert len(await asyncio.gather(*calls)) == 3
    with pytest.raises(TimeoutError):
        await fake.wait_for_requests(4, timeout_s=0.05)
