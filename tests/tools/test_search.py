"""Search: rendering, the TTL cache, the tool's failure observations, the real ddgs backend.

The ddgs backend is exercised for real: through loopback HTTP proxies that refuse or
stall the CONNECT (library error and timeout paths), and once against the internet,
which on machines without network asserts the graceful failure path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from core.tools.registry import ToolContext
from core.tools.search import (
    CachedSearch,
    DuckDuckGoSearch,
    SearchError,
    SearchResult,
    duckduckgo_backend,
    render_results,
    search_tool,
)

CTX = ToolContext(platform="console", chat_id="c1", user_id="u1", display_name="Ann")


class ScriptedSearch:
    """A SearchBackend that answers from a dict and counts calls per query."""

    def __init__(self, answers: dict[str, list[SearchResult] | Exception]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    async def search(self, query: str) -> list[SearchResult]:
        self.calls.append(query)
        answer = self.answers.get(query, [])
        if isinstance(answer, Exception):
            raise answer
        return answer


def _results(n: int, snippet: str = "snippet") -> list[SearchResult]:
    return [SearchResult(f"Title {i}", f"https://example.org/{i}", snippet) for i in range(n)]


def test_render_numbers_title_url_snippet() -> None:
    text = render_results(_results(2))
    assert text == (
        "1. Title 0\n   https://example.org/0\n   snippet\n"
        "2. Title 1\n   https://example.org/1\n   snippet"
    )
    assert render_results([]) == "No results were found for this query."


def test_render_caps_total_size() -> None:
    results = _results(20, snippet="s" * 500)
    text = render_results(results, max_chars=1500)
    assert len(text) <= 1500
    assert text.startswith("1. Title 0") and "2. Title 1" in text
    assert "20. Title 19" not in text
    # A single result larger than the cap is clipped, not dropped.
    one = render_results(_results(1, snippet="z" * 590), max_chars=100)
    assert len(one) == 100 and one.endswith("…")


async def test_cache_reuses_within_ttl_and_expires() -> None:
    now = [1000.0]
    backend = ScriptedSearch({"rust": _results(1)})
    cache = CachedSearch(backend, ttl_s=300, clock=lambda: now[0])
    assert await cache.search("rust") == _results(1)
    assert await cache.search("  RUST ") == _results(1)
    assert backend.calls == ["rust"]
    now[0] += 301
    await cache.search("rust")
    assert backend.calls == ["rust", "rust"]


async def test_cache_keeps_the_recently_used_and_a_hit_does_not_extend_the_ttl() -> None:
    now = [1000.0]
    backend = ScriptedSearch({})
    cache = CachedSearch(backend, ttl_s=300, max_entries=2, clock=lambda: now[0])
    await cache.search("a")
    await cache.search("b")
    now[0] += 200
    await cache.search("a")  # a hit: "a" is now the most recently used
    await cache.search("c")  # full: "b", the least recently used, goes
    await cache.search("a")
    assert backend.calls == ["a", "b", "c"]
    now[0] += 101  # "a" was fetched 301 s ago; the hits did not make it younger
    await cache.search("a")
    await cache.search("b")
    assert backend.calls == ["a", "b", "c", "a", "b"]


async def test_cache_is_bounded_and_does_not_keep_failures() -> None:
    backend = ScriptedSearch({"bad": SearchError("boom")})
    cache = CachedSearch(backend, max_entries=2)
    for query in ("a", "b", "c"):
        await cache.search(query)
    await cache.search("a")  # evicted as the oldest: asked again
    assert backend.calls == ["a", "b", "c", "a"]
    for _ in range(2):
        with pytest.raises(SearchError):
            await cache.search("bad")
    assert backend.calls.count("bad") == 2


async def test_tool_renders_results_and_failures() -> None:
    backend = ScriptedSearch({"ok": _results(1), "down": SearchError("rate limited")})
    tool = search_tool(backend)
    good = await tool.handler("  ok  ", CTX)
    assert good.ok and "https://example.org/0" in good.text
    bad = await tool.handler("down", CTX)
    assert not bad.ok
    assert "search failed: rate limited" in bad.text and "what you already know" in bad.text
    empty = await tool.handler("   ", CTX)
    assert not empty.ok and backend.calls == ["ok", "down"]
    await tool.handler("q" * 1000, CTX)
    assert backend.calls[-1] == "q" * 300


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def proxy() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """Start loopback HTTP 'proxies' with a given connection handler; returns their URL."""
    servers: list[asyncio.Server] = []
    release = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def start(handler: Handler) -> str:
        async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            try:
                await handler(reader, writer)
                await release.wait()
            finally:
                writer.close()

        server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    release.set()
    await asyncio.sleep(0)
    for writer in writers:
        writer.close()
    for server in servers:
        server.close()
        await server.wait_closed()


async def test_ddgs_library_error_becomes_search_error(proxy) -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    backend = DuckDuckGoSearch(max_results=3, timeout_s=5, proxy=await proxy(refuse))
    try:
        with pytest.raises(SearchError, match="search engine error") as caught:
            await backend.search("python asyncio")
        assert "502" in str(caught.value) and len(str(caught.value)) < 300
    finally:
        backend.close()


async def test_ddgs_stall_is_cut_by_our_timeout(proxy) -> None:
    connected = asyncio.Event()

    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()  # then never answer

    backend = DuckDuckGoSearch(max_results=3, timeout_s=0.3, proxy=await proxy(stall))
    try:
        started = time.monotonic()
        with pytest.raises(SearchError, match=r"timed out after 0.3 s"):
            await backend.search("python asyncio")
        assert time.monotonic() - started < 0.9  # ours, not the library's 1 s
        assert connected.is_set()
    finally:
        backend.close()


async def test_closed_backend_fails_cleanly() -> None:
    backend = duckduckgo_backend(3, timeout_s=1)
    backend.close()  # closes the wrapped DuckDuckGoSearch
    with pytest.raises(SearchError, match="shutting down"):
        await backend.search("x")


@pytest.mark.network
async def test_real_duckduckgo_or_graceful_failure() -> None:
    """With network: real results. Without (as on the project's machines): a clean failure."""
    backend = DuckDuckGoSearch(max_results=3, timeout_s=4)
    tool = search_tool(backend)
    try:
        observation = await tool.handler("Python programming language", CTX)
    finally:
        backend.close()
    if observation.ok:
        assert "http" in observation.text and "1. " in observation.text
    else:
        assert observation.text.startswith("The web search failed: ")
        assert "what you already know" in observation.text
        assert "Traceback" not in observation.text and len(observation.text) < 600
