"""OpenAIProvider.stream_chat against FakeOpenAI streaming Server-Sent Events on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import aclosing

import pytest
from aiohttp import web

from core.llm import ChatResult, LLMError, OpenAIProvider, StreamDone, StreamEvent, TextDelta
from tests.conftest import MakeProvider
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_stream import StreamShape

KEY = "sk-test-STREAMSECRET-0123456789"
HELLO = [{"role": "user", "content": "hello there"}]

PROVIDER_DEFAULTS = {"api_key": KEY, "stream_stall_s": 5.0, "retry_backoff_s": 0.0}


async def collect(provider: OpenAIProvider, **kw: object) -> tuple[list[str], ChatResult]:
    """The text deltas in order and the final result; StreamDone must come last, once."""
    events: list[StreamEvent] = []
    async with aclosing(provider.stream_chat(HELLO, **kw)) as stream:  # type: ignore[arg-type]
        async for event in stream:
            events.append(event)
    *deltas, done = events
    assert isinstance(done, StreamDone)
    assert all(isinstance(d, TextDelta) for d in deltas)
    return [d.text for d in deltas if isinstance(d, TextDelta)], done.result


async def collect_until_error(provider: OpenAIProvider) -> tuple[list[str], LLMError]:
    seen: list[str] = []
    with pytest.raises(LLMError) as info:
        async with aclosing(provider.stream_chat(HELLO)) as stream:
            async for event in stream:
                assert isinstance(event, TextDelta), "no StreamDone after a failure"
                seen.append(event.text)
    return seen, info.value


# -- a good stream ---------------------------------------------------------------------


async def test_deltas_in_order_join_to_the_text_with_usage(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("The quick brown fox jumps.", usage=(21, 6), stream=StreamShape(delay_s=0.001))
    deltas, result = await collect(make_provider())
    assert deltas == ["The ", "quick ", "brown ", "fox ", "jumps."]
    assert result == ChatResult(
        text="The quick brown fox jumps.",
        model="test-model",
        finish_reason="stop",
        prompt_tokens=21,
        completion_tokens=6,
        tool_calls=[],
        endpoint=f"127.0.0.1:{fake.port}",
    )


async def test_request_asks_for_a_stream_with_usage(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    await collect(make_provider(temperature=0.3), max_tokens=50, tools=tools)
    (request,) = fake.requests
    assert request.json == {
        "model": "test-model",
        "messages": HELLO,
        "temperature": 0.3,
        "max_tokens": 50,
        "tools": tools,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert request.headers["authorization"] == f"Bearer {KEY}"


async def test_no_usage_chunk_means_unknown_usage(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("short answer", stream=StreamShape(send_usage=False))
    deltas, result = await collect(make_provider())
    assert "".join(deltas) == result.text == "short answer"
    assert (result.prompt_tokens, result.completion_tokens) == (None, None)


async def test_stream_and_chat_agree_on_tool_calls(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    calls = [
        {"id": "call_a", "name": "search", "arguments": {"q": "weather in Paris tomorrow"}},
        {"id": "call_b", "name": "remember", "arguments": {"fact": "likes rain"}},
    ]
    fake.reply_tool_calls(calls, text="Let me check.", stream=StreamShape(piece_chars=5))
    fake.reply_tool_calls(calls, text="Let me check.")
    provider = make_provider()
    deltas, streamed = await collect(provider)
    whole = await provider.chat(HELLO)
    assert "".join(deltas) == "Let me check." and len(deltas) == 3  # 5-character pieces
    assert streamed.finish_reason == "tool_calls"
    assert streamed.tool_calls == whole.tool_calls
    assert [c["function"]["name"] for c in streamed.tool_calls] == ["search", "remember"]
    first = json.loads(streamed.tool_calls[0]["function"]["arguments"])
    assert first == {"q": "weather in Paris tomorrow"}


async def test_slow_consumer_is_not_a_stall(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    """Time spent by the consumer between deltas (a slow channel edit) is not the model's."""
    fake.reply("one two three")
    provider = make_provider(stream_stall_s=0.1)
    seen: list[str] = []
    async with aclosing(provider.stream_chat(HELLO)) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                seen.append(event.text)
                await asyncio.sleep(0.25)  # the consumer is slow, the model is not
    assert "".join(seen) == "one two three"


async def test_closing_early_releases_the_stream(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("first second third", stream=StreamShape(stall_after=2))
    provider = make_provider()
    async with aclosing(provider.stream_chat(HELLO)) as stream:
        first = await anext(stream)
    assert first == TextDelta("first ")
    _, result = await collect(provider)  # the provider still works
    assert result.text == "This is a reply from the fake model."


# -- failures --------------------------------------------------------------------------


async def test_stall_after_text_is_a_timeout_and_not_retried(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("one two three four", stream=StreamShape(stall_after=2))
    seen, error = await collect_until_error(make_provider(stream_stall_s=0.2, max_retries=2))
    assert seen == ["one ", "two "]
    assert error.kind == "timeout"
    assert len(fake.requests) == 1  # text was out: another attempt would repeat it


async def test_read_timeout_mid_stream_is_a_timeout_too(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    """The HTTP read limit (timeout_s) stops a silent stream when it is the shorter one."""
    fake.reply("one two three", stream=StreamShape(stall_after=1))
    seen, error = await collect_until_error(make_provider(timeout_s=0.2, stream_stall_s=30))
    assert (seen, error.kind) == (["one "], "timeout")


async def test_stall_before_any_text_is_retried_then_a_timeout(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("lost", stream=StreamShape(stall_after=0))
    fake.reply("found it")
    _, result = await collect(make_provider(stream_stall_s=0.2, max_retries=1))
    assert result.text == "found it" and len(fake.requests) == 2

    fake.reply("lost", stream=StreamShape(stall_after=0))
    seen, error = await collect_until_error(make_provider(stream_stall_s=0.2, max_retries=0))
    assert (seen, error.kind) == ([], "timeout")


async def test_connection_dropped_before_text_is_retried(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("never seen", stream=StreamShape(drop_after=0))  # headers, role chunk, cut
    fake.drop()  # no response at all (the SDK's own retry)
    fake.reply("second wind")
    deltas, result = await collect(make_provider(max_retries=2))
    assert "".join(deltas) == result.text == "second wind"
    assert len(fake.requests) == 3


async def test_connection_dropped_after_text_is_an_error(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.reply("half an answer is worse", stream=StreamShape(drop_after=2))
    fake.reply("a fresh second answer")
    seen, error = await collect_until_error(make_provider(max_retries=2))
    assert seen == ["half ", "an "]
    assert error.kind == "unavailable"
    assert len(fake.requests) == 1 and fake.pending_script == 1


async def test_drops_use_up_the_retries(fake: FakeOpenAI, make_provider: MakeProvider) -> None:
    for _ in range(2):
        fake.reply("x", stream=StreamShape(drop_after=0))
    seen, error = await collect_until_error(make_provider(max_retries=1))
    assert (seen, error.kind, len(fake.requests)) == ([], "unavailable", 2)


async def test_500_before_streaming_is_retried_and_mapped_like_chat(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.fail(500, times=2, retry_after_ms=1)
    fake.reply("finally")
    _, result = await collect(make_provider(max_retries=2))
    assert result.text == "finally" and len(fake.requests) == 3

    fake.fail(503, times=2, retry_after_ms=1)
    _, error = await collect_until_error(make_provider(max_retries=1))
    assert (error.kind, error.status) == ("unavailable", 503)


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "bad_request"), (401, "auth"), (429, "rate_limited")]
)
async def test_status_errors_are_mapped_like_chat(
    fake: FakeOpenAI, make_provider: MakeProvider, status: int, kind: str
) -> None:
    fake.fail(status, f"server says {KEY} RAW-SERVER-TEXT", retry_after_ms=1)
    provider = make_provider()
    _, streamed = await collect_until_error(provider)
    fake.fail(status, f"server says {KEY} RAW-SERVER-TEXT", retry_after_ms=1)
    with pytest.raises(LLMError) as whole:
        await provider.chat(HELLO)
    assert (streamed.kind, streamed.status) == (kind, status)
    assert str(streamed) == str(whole.value)
    assert "RAW-SERVER-TEXT" not in str(streamed)


async def test_timeout_before_the_stream_opens(
    fake: FakeOpenAI, make_provider: MakeProvider
) -> None:
    fake.hang()
    _, error = await collect_until_error(make_provider(timeout_s=0.2))
    assert error.kind == "timeout"


# -- servers that do not stream properly -----------------------------------------------


async def serve_raw(body: bytes, content_type: str) -> web.AppRunner:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(body=body, content_type=content_type)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


def sse(*events: object) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
BROKEN = [
    # a server that ignored stream=true and answered with a whole completion
    (b'{"choices": [{"message": {"content": "hi"}}]}', "application/json", "malformed"),
    (sse({**CHUNK, "choices": [{"index": 0, "delta": {"content": 5}}]}), "text/event-stream", ""),
    (sse({**CHUNK, "choices": "nope"}), "text/event-stream", "malformed"),
    (sse({"error": {"message": f"RAW-SERVER-TEXT {KEY}"}}), "text/event-stream", ""),
]


@pytest.mark.parametrize("case", range(len(BROKEN)))
async def test_broken_streams_are_unavailable(make_provider: MakeProvider, case: int) -> None:
    body, content_type, phrase = BROKEN[case]
    runner = await serve_raw(body, content_type)
    try:
        port = runner.addresses[0][1]
        provider = make_provider(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
        _, error = await collect_until_error(provider)
    finally:
        await runner.cleanup()
    assert error.kind == "unavailable" and phrase in str(error)
    assert "RAW-SERVER-TEXT" not in str(error) and KEY not in str(error)


async def test_api_key_never_in_stream_errors_or_logs(
    fake: FakeOpenAI, make_provider: MakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make_provider(stream_stall_s=0.2, max_retries=0)
    fake.fail(401, f"Incorrect API key provided: {KEY}")
    fake.reply(f"leaked {KEY}?", stream=StreamShape(stall_after=1))
    fake.reply("x", stream=StreamShape(drop_after=0))
    errors = [(await collect_until_error(provider))[1] for _ in range(3)]
    await collect(provider)  # a success logs too
    assert [e.kind for e in errors] == ["auth", "timeout", "unavailable"]
    for error in errors:
        assert KEY not in str(error) and KEY not in repr(error)
        assert error.__cause__ is None and error.__suppress_context__
    assert caplog.records and KEY not in caplog.text
