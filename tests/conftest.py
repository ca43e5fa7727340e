"""Shared fixtures: a fresh database per test, SQLite by default or PostgreSQL on request.

Set CHATTERD_TEST_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test to run
the same tests on PostgreSQL; each test then gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from core.llm import OpenAIProvider
from memory.turns.store import SqlStorage, open_storage
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

TEST_DATABASE_ENV = "CHATTERD_TEST_DATABASE_URL"


async def _postgres_admin(url: str, statement: str) -> None:
    engine = create_async_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def _run_aside(coro: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine on a private loop in another thread, clear of pytest-asyncio's."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coro).result()


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """A storage URL for an empty database, usable by sync and async tests alike."""
    base = os.environ.get(TEST_DATABASE_ENV)
    if not base:
        yield f"sqlite:///{tmp_path / 'data' / 'chatterd.sqlite'}"
        return
    schema = f"test_{uuid.uuid4().hex[:16]}"
    _run_aside(_postgres_admin(base, f'CREATE SCHEMA "{schema}"'))
    try:
        url = make_url(base).update_query_dict({"search_path": schema})
        yield url.render_as_string(hide_password=False)
    finally:
        _run_aside(_postgres_admin(base, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@pytest.fixture
async def storage(database_url: str) -> AsyncIterator[SqlStorage]:
    """An opened, migrated SqlStorage on the fresh database; closed after the test."""
    store = await open_storage(database_url)
    try:
        yield store
    finally:
        await store.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One clear line when the browser tests were skipped (no Chromium on this machine)."""
    reasons = {
        str(report.longrepr[2]).removeprefix("Skipped: ")
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and "browser tests skipped" in str(report.longrepr[2])
    }
    for reason in sorted(reasons):
        terminalreporter.write_line(reason, yellow=True)


# -- shared fakes: one definition each, used across the test files ---------------------


@pytest.fixture
async def tg(request: pytest.FixtureRequest) -> AsyncIterator[FakeTelegram]:
    """The fake Bot API (bot @chatterd_test_bot). In a module whose `clock` fixture is a
    virtual clock (it has `monotonic`), the fake keeps that clock's time."""
    try:
        clock = request.getfixturevalue("clock")
    except pytest.FixtureLookupError:
        clock = None
    monotonic = getattr(clock, "monotonic", None)
    extra: dict[str, Any] = {"clock": monotonic} if callable(monotonic) else {}
    async with FakeTelegram(**extra) as fake:
        yield fake


MakeProvider = Callable[..., OpenAIProvider]


@pytest.fixture
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[FakeOpenAI]:
    """A fake OpenAI-compatible server: its default script, or the module's `FAKE_OPENAI`
    (FakeOpenAI's keyword arguments: the reply, the model name, latency, stream shape)."""
    async with FakeOpenAI(**getattr(request.module, "FAKE_OPENAI", {})) as server:
        yield server


@pytest.fixture
async def chat(request: pytest.FixtureRequest) -> AsyncIterator[FakeOpenAI]:
    """The fake chat model a module's daemon talks to, apart from `fake` (a test may use
    both: the chat model and an embedding or vision endpoint): model "chat-model", then
    the module's `FAKE_CHAT` (FakeOpenAI's keyword arguments, as for `fake`)."""
    options = {"model": "chat-model", **getattr(request.module, "FAKE_CHAT", {})}
    async with FakeOpenAI(**options) as server:
        yield server


@pytest.fixture
async def vision(request: pytest.FixtureRequest) -> AsyncIterator[FakeOpenAI]:
    """A fake vision model beside `chat`: model "vision-model", then the module's
    `FAKE_VISION` (FakeOpenAI's keyword arguments)."""
    options = {"model": "vision-model", **getattr(request.module, "FAKE_VISION", {})}
    async with FakeOpenAI(**options) as server:
        yield server


@pytest.fixture
def model(chat: FakeOpenAI) -> FakeOpenAI:
    """`chat` under the name the tests of a daemon with one model give it."""
    return chat


@pytest.fixture
async def make_provider(
    fake: FakeOpenAI, request: pytest.FixtureRequest
) -> AsyncIterator[MakeProvider]:
    """Makes OpenAIProviders on `fake` (closed after the test): the model "test-model",
    5 s timeout, no retries, then the module's `PROVIDER_DEFAULTS`, then the call's."""
    made: list[OpenAIProvider] = []
    module_defaults = getattr(request.module, "PROVIDER_DEFAULTS", {})

    def make(**kw: object) -> OpenAIProvider:
        args: dict[str, object] = {
            "base_url": fake.base_url,
            "model": "test-model",
            "timeout_s": 5.0,
            "max_retries": 0,
            **module_defaults,
            **kw,
        }
        provider = OpenAIProvider(**args)  # type: ignore[arg-type]
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.close()


@pytest.fixture
def llm(make_provider: MakeProvider) -> OpenAIProvider:
    """One provider on `fake`, as `make_provider()` makes it."""
    return make_provider()
