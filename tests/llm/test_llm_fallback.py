"""FallbackProvider over two FakeOpenAI servers on loopback, with an injected clock."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from bot.config import ConfigError, LlmConfig, load_config, mask_secrets
from core.llm import (
    FallbackProvider,
    LLMError,
    LLMProvider,
    OpenAIProvider,
    StreamDone,
    TextDelta,
    provider_from_config,
    with_fallbacks,
)
from core.messages import ChatType, ImageRef, InboundMessage
from tests.fakes.manual_clock import ManualTicker
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_stream import StreamShape
from tests.rig import answer_of, daemon, settings_for

PRIMARY_KEY = "sk-primary-SECRET-1111111111"
SECONDARY_KEY = "sk-secondary-SECRET-2222222222"
HELLO = [{"role": "user", "content": "hello there"}]
COOLDOWN = 60.0


@pytest.fixture
async def primary() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(reply="from the primary", model="primary-model") as fake:
        yield fake


@pytest.fixture
async def secondary() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(reply="from the secondary", model="secondary-model") as fake:
        yield fake


@pytest.fixture
def clock() -> ManualTicker:
    return ManualTicker()


MakeFallback = Callable[..., FallbackProvider]


@pytest.fixture
async def make(
    primary: FakeOpenAI, secondary: FakeOpenAI, clock: ManualTicker
) -> AsyncIterator[MakeFallback]:
    made: list[FallbackProvider] = []

    def endpoint(fake: FakeOpenAI, key: str, model: str, **kw: Any) -> OpenAIProvider:
        args: dict[str, Any] = {"timeout_s": 5.0, "max_retries": 0, "retry_backoff_s": 0.0}
        args.update(kw)
        return OpenAIProvider(fake.base_url, key, model, **args)

    def make_fallback(*, only_primary: bool = False, **kw: Any) -> FallbackProvider:
        providers: list[LLMProvider] = [endpoint(primary, PRIMARY_KEY, "primary-model", **kw)]
        if not only_primary:
            providers.append(endpoint(secondary, SECONDARY_KEY, "secondary-model", **kw))
        provider = FallbackProvider(providers, cooldown_s=COOLDOWN, clock=clock)
        made.append(provider)
        return provider

    yield make_fallback
    for provider in made:
        await provider.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def host(fake: FakeOpenAI) -> str:
    return f"127.0.0.1:{fake.port}"


async def stream_text(provider: LLMProvider) -> tuple[list[str], str]:
    deltas: list[str] = []
    final = None
    async with aclosing(provider.stream_chat(HELLO)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                deltas.append(event.text)
            else:
                assert isinstance(event, StreamDone)
                final = event.result
    assert final is not None
    return deltas, final.text


# -- chat --------------------------------------------------------------------------------


async def test_primary_500_secondary_answers_and_says_so(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback
) -> None:
    primary.fail(500)
    result = await make().chat(HELLO)
    assert result.text == "from the secondary"
    assert (result.model, result.endpoint) == ("secondary-model", host(secondary))
    assert (len(primary.requests), len(secondary.requests)) == (1, 1)
    assert secondary.requests[0].headers["authorization"] == f"Bearer {SECONDARY_KEY}"


async def test_primary_skipped_during_the_cooldown_and_used_after_it(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback, clock: ManualTicker
) -> None:
    provider = make()
    primary.fail(503)
    await provider.chat(HELLO)
    clock.advance(COOLDOWN - 1)
    assert (await provider.chat(HELLO)).text == "from the secondary"
    assert len(primary.requests) == 1  # skipped: no request reached it
    clock.advance(2)
    assert (await provider.chat(HELLO)).text == "from the primary"
    assert (len(primary.requests), len(secondary.requests)) == (2, 2)


async def test_400_is_not_retried_elsewhere(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback
) -> None:
    provider = make()
    primary.fail(400, "context too long")
    with pytest.raises(LLMError) as info:
        await provider.chat(HELLO)
    assert (info.value.kind, info.value.status) == ("bad_request", 400)
    assert secondary.requests == []
    assert (await provider.chat(HELLO)).text == "from the primary"  # no cool-down either


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_key_logs_one_loud_line_per_cooldown_and_falls_back(
    primary: FakeOpenAI,
    make: MakeFallback,
    clock: ManualTicker,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make()
    primary.fail(status, f"Incorrect API key provided: {PRIMARY_KEY}", times=2)
    for _ in range(3):
        assert (await provider.chat(HELLO)).text == "from the secondary"
    clock.advance(COOLDOWN + 1)
    assert (await provider.chat(HELLO)).text == "from the secondary"
    loud = [r for r in caplog.records if "KEY WAS REFUSED" in r.getMessage()]
    assert len(loud) == 2 and all(r.levelno == logging.WARNING for r in loud)
    assert host(primary) in loud[0].getMessage() and "primary-model" in loud[0].getMessage()
    assert PRIMARY_KEY not in caplog.text and "SECRET" not in caplog.text


async def test_refused_key_alone_still_warns_once_per_cooldown(
    primary: FakeOpenAI, make: MakeFallback, clock: ManualTicker, caplog: pytest.LogCaptureFixture
) -> None:
    """With no fallback the endpoint is tried every time, but the loud line is not repeated."""
    provider = make(only_primary=True)
    primary.fail(401, times=4)
    for _ in range(3):
        with pytest.raises(LLMError) as info:
            await provider.chat(HELLO)
        assert info.value.kind == "auth"
    clock.advance(COOLDOWN)
    with pytest.raises(LLMError):
        await provider.chat(HELLO)
    assert len(primary.requests) == 4
    assert sum("KEY WAS REFUSED" in r.getMessage() for r in caplog.records) == 2


async def test_timeout_falls_back(primary: FakeOpenAI, make: MakeFallback) -> None:
    primary.hang()
    result = await make(timeout_s=0.2).chat(HELLO)
    assert result.text == "from the secondary"


@pytest.mark.parametrize("status", [429, 404, 502])
async def test_endpoint_faults_fall_back(
    primary: FakeOpenAI, make: MakeFallback, status: int
) -> None:
    primary.fail(status, times=2, retry_after_ms=1)
    result = await make(max_retries=1).chat(HELLO)  # 429/5xx: after the SDK's retries
    assert result.text == "from the secondary"
    assert len(primary.requests) == (1 if status == 404 else 2)


async def test_refused_connection_falls_back(secondary: FakeOpenAI, clock: ManualTicker) -> None:
    dead = OpenAIProvider(f"http://127.0.0.1:{free_port()}/v1", PRIMARY_KEY, "p", max_retries=0)
    alive = OpenAIProvider(secondary.base_url, SECONDARY_KEY, "s", max_retries=0)
    provider = FallbackProvider([dead, alive], cooldown_s=COOLDOWN, clock=clock)
    try:
        assert (await provider.chat(HELLO)).text == "from the secondary"
    finally:
        await provider.close()


async def test_all_cooling_down_tries_the_one_that_recovers_first(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback, clock: ManualTicker
) -> None:
    provider = make()
    primary.fail(500)
    await provider.chat(HELLO)  # primary cools down until +60
    clock.advance(30)
    secondary.fail(500)
    with pytest.raises(LLMError) as info:
        await provider.chat(HELLO)  # only the secondary was ready; now it cools until +90
    assert info.value.status == 500 and len(primary.requests) == 1
    clock.advance(10)
    assert (await provider.chat(HELLO)).text == "from the primary"  # ends first: tried
    assert (len(primary.requests), len(secondary.requests)) == (2, 2)


async def test_every_endpoint_failing_names_each_host(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback
) -> None:
    primary.fail(500)
    secondary.fail(429, retry_after_ms=1)
    with pytest.raises(LLMError) as info:
        await make().chat(HELLO)
    assert (info.value.kind, info.value.status) == ("rate_limited", 429)
    assert f"{host(primary)} (unavailable)" in str(info.value)
    assert f"{host(secondary)} (rate_limited)" in str(info.value)


# -- streaming ---------------------------------------------------------------------------


async def test_stream_falls_back_before_the_first_delta(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback
) -> None:
    provider = make()
    primary.fail(500)
    deltas, text = await stream_text(provider)
    assert "".join(deltas) == text == "from the secondary"
    primary.reply("never shown", stream=StreamShape(drop_after=0))  # opened, then cut
    provider = make()
    deltas, text = await stream_text(provider)
    assert "".join(deltas) == "from the secondary"
    assert len(secondary.requests) == 2 and secondary.requests[1]["stream"] is True


async def test_stream_failure_after_text_is_raised_not_spliced(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback, clock: ManualTicker
) -> None:
    provider = make(stream_stall_s=0.2)
    primary.reply("half of it", stream=StreamShape(stall_after=1))
    seen: list[str] = []
    with pytest.raises(LLMError) as info:
        async with aclosing(provider.stream_chat(HELLO)) as events:
            async for event in events:
                assert isinstance(event, TextDelta)
                seen.append(event.text)
    assert (seen, info.value.kind) == (["half "], "timeout")
    assert secondary.requests == []
    assert provider.health()[0]["state"] == "cooling_down"  # it did fail
    deltas, _ = await stream_text(provider)
    assert "".join(deltas) == "from the secondary"


async def test_stream_skips_a_cooling_endpoint_and_400_is_raised(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback
) -> None:
    provider = make()
    primary.fail(500)
    await provider.chat(HELLO)
    await stream_text(provider)
    assert len(primary.requests) == 1
    secondary.fail(400)
    with pytest.raises(LLMError) as info:
        await stream_text(provider)
    assert info.value.kind == "bad_request"


# -- health and secrets ------------------------------------------------------------------


async def test_health_snapshot(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback, clock: ManualTicker
) -> None:
    provider = make()
    assert isinstance(provider, LLMProvider)
    assert (provider.model, provider.endpoint) == ("primary-model", host(primary))
    assert [h["state"] for h in provider.health()] == ["unknown", "unknown"]
    primary.fail(500)
    await provider.chat(HELLO)
    clock.advance(15)
    assert provider.health() == [
        {
            "endpoint": host(primary),
            "model": "primary-model",
            "role": "primary",
            "state": "cooling_down",
            "last_error": "unavailable",
            "retry_in_s": 45.0,
        },
        {
            "endpoint": host(secondary),
            "model": "secondary-model",
            "role": "fallback",
            "state": "ok",
            "last_error": None,
            "retry_in_s": 0.0,
        },
    ]
    clock.advance(COOLDOWN)
    assert provider.health()[0]["state"] == "unknown"  # will be tried again
    await provider.chat(HELLO)
    assert provider.health()[0]["state"] == "ok"
    text = json.dumps(provider.health())
    assert PRIMARY_KEY not in text and SECONDARY_KEY not in text


async def test_keys_never_in_logs_or_errors(
    primary: FakeOpenAI, secondary: FakeOpenAI, make: MakeFallback, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make(timeout_s=0.2)
    primary.fail(401, PRIMARY_KEY)
    await provider.chat(HELLO)
    secondary.fail(500, SECONDARY_KEY)
    with pytest.raises(LLMError) as info:
        await provider.chat(HELLO)  # the primary is cooling down: only the secondary
    assert SECONDARY_KEY not in str(info.value)
    provider = make(timeout_s=0.2)
    primary.hang()
    secondary.fail(403, SECONDARY_KEY)
    with pytest.raises(LLMError) as info:
        await stream_text(provider)
    for key in (PRIMARY_KEY, SECONDARY_KEY):
        assert key not in str(info.value) and key not in caplog.text
    assert "SECRET" not in caplog.text


# -- configuration and wiring ------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_fallbacks_load_from_toml_and_are_masked(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[llm]\ncooldown_s = 5\nfallbacks = [\n"
        '  { base_url = "https://api.deepseek.com/v1", api_key = "sk-fb-hidden", '
        'model = "deepseek-chat" },\n'
        '  { base_url = "http://127.0.0.1:11434/v1", model = "qwen" },\n]\n'
        '[vision]\nfallbacks = [{ base_url = "https://v.example/v1", api_key = "sk-vis-hidden",'
        ' model = "v" }]\n',
    )
    settings = load_config(path, environ={})
    first, second = settings.llm.fallbacks
    assert (first.model, first.api_key is not None, second.api_key) == ("deepseek-chat", True, None)
    assert settings.llm.cooldown_s == 5 and settings.llm.stream_stall_s == 30
    data = mask_secrets(settings)
    assert data["llm"]["fallbacks"][0]["api_key"] == "***"
    assert data["llm"]["fallbacks"][1]["api_key"] is None
    assert data["vision"]["fallbacks"][0]["api_key"] == "***"
    assert "hidden" not in json.dumps(data)


def test_fallbacks_from_the_environment_as_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [{"base_url": "https://b.example/v1", "api_key": "sk-env", "model": "b"}]
    monkeypatch.setenv("CHATTERD_LLM__FALLBACKS", json.dumps(entries))
    settings = load_config(tmp_path / "absent.toml", environ={})
    (entry,) = settings.llm.fallbacks
    assert entry.model == "b" and entry.api_key is not None


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('{ model = "m" }', "llm.fallbacks.0.base_url"),
        ('{ base_url = "ftp://x", model = "m" }', "llm.fallbacks.0.base_url"),
        ('{ base_url = "https://x/v1" }', "llm.fallbacks.0.model"),
        ('{ base_url = "https://x/v1", model = "m", typo = 1 }', "llm.fallbacks.0.typo"),
    ],
)
def test_bad_fallback_entry_names_the_key(tmp_path: Path, entry: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config: {key}: "):
        load_config(write(tmp_path, f"[llm]\nfallbacks = [{entry}]\n"), environ={})


async def test_with_fallbacks_sends_each_endpoint_its_own_key_only(
    primary: FakeOpenAI, secondary: FakeOpenAI
) -> None:
    cfg = LlmConfig.model_validate(
        {
            "base_url": primary.base_url,
            "api_key": PRIMARY_KEY,
            "model": "primary-model",
            "max_retries": 0,
            "cooldown_s": 7,
            "fallbacks": [
                {"base_url": secondary.base_url, "api_key": SECONDARY_KEY, "model": "s1"},
                {"base_url": secondary.base_url, "model": "s2"},  # no key of its own
            ],
        }
    )
    frozen = 1000.0  # the cool-downs are read at the instant they start, however slow the run
    provider = with_fallbacks(provider_from_config(cfg), cfg, clock=lambda: frozen)
    primary.fail(500)
    secondary.fail(500)
    try:
        result = await provider.chat(HELLO)
    finally:
        await provider.close()
    assert result.model == "s2"
    keyed, keyless = (r.headers["authorization"] for r in secondary.requests)
    assert keyed == f"Bearer {SECONDARY_KEY}"
    assert PRIMARY_KEY not in keyless and SECONDARY_KEY not in keyless
    assert [h["retry_in_s"] for h in provider.health()] == [7.0, 7.0, 0.0]


async def test_the_daemon_answers_through_the_fallback_and_reports_health(
    tmp_path: Path, database_url: str, primary: FakeOpenAI, secondary: FakeOpenAI
) -> None:
    settings = settings_for(
        tmp_path,
        database_url,
        primary,
        llm={
            "api_key": PRIMARY_KEY,
            "fallbacks": [{"base_url": secondary.base_url, "api_key": SECONDARY_KEY, "model": "s"}],
        },
        vision={
            "enabled": True,
            "base_url": secondary.base_url,
            "fallbacks": [{"base_url": primary.base_url, "model": "v2"}],
        },
    )
    primary.fail(500)
    async with daemon(settings) as app:
        assert app.processor is not None
        reply = await answer_of(
            app, InboundMessage("console", "c1", ChatType.PRIVATE, "u1", "Alice", "hi")
        )
        health = app.model_health()
    assert reply == "from the secondary"
    assert [(h["model"], h["state"]) for h in health["llm"]] == [
        ("primary-model", "cooling_down"),
        ("s", "ok"),
    ]
    assert [h["model"] for h in health["vision"]] == ["gpt-4o-mini", "v2"]


async def test_the_daemon_describes_images_through_the_vision_fallback(
    tmp_path: Path, database_url: str, primary: FakeOpenAI, secondary: FakeOpenAI
) -> None:
    """[vision] fallbacks: the vision primary is down, the fallback describes the image,
    the chat model sees that description, and the vision primary then cools down."""
    from tests.channels.test_channel_e2e import PNG

    async def fetch() -> bytes:
        return PNG

    settings = settings_for(
        tmp_path,
        database_url,
        secondary,
        llm={"api_key": SECONDARY_KEY},
        vision={
            "enabled": True,
            "base_url": primary.base_url,
            "api_key": PRIMARY_KEY,
            "model": "vision-primary",
            "fallbacks": [
                {"base_url": secondary.base_url, "api_key": SECONDARY_KEY, "model": "v2"}
            ],
        },
    )
    primary.fail(503)
    secondary.reply("a red bicycle")  # the description, then the chat model's answer
    async with daemon(settings) as app:
        assert app.processor is not None
        image = ImageRef(fetch, "image/png")
        await answer_of(
            app,
            InboundMessage("console", "c1", ChatType.PRIVATE, "u1", "Al", "look", images=(image,)),
        )
        health = app.model_health()
    (failed,) = primary.requests
    described, answered = secondary.requests
    assert failed["model"] == "vision-primary" and described["model"] == "v2"
    assert "(Image 1: a red bicycle)" in str(answered["messages"][-1]["content"])
    assert [(h["model"], h["state"]) for h in health["vision"]] == [
        ("vision-primary", "cooling_down"),
        ("v2", "ok"),
    ]
