"""SSRF-safe downloader: real HTTP on 127.0.0.1, refusals checked on resolved addresses."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from core.media.fetch import (
    DownloadError,
    DownloadPolicy,
    DownloadRefused,
    DownloadTooLarge,
    SafeDownloader,
    is_public_address,
)
from tests.fakes.dns import MapResolver
from tests.fakes.onebot_impl import PNG, MediaServer


@pytest.fixture
async def media() -> AsyncIterator[MediaServer]:
    server = await MediaServer().start()
    server.files["cat.png"] = (PNG, "image/png")
    server.files["big.bin"] = (b"x" * 5000, "application/octet-stream")
    yield server
    await server.close()


def policy(**kw: object) -> DownloadPolicy:
    base: dict[str, object] = {"max_bytes": 4096, "timeout_s": 3.0}
    base.update(kw)
    return DownloadPolicy(**base)  # type: ignore[arg-type]


async def test_allowed_private_host_is_fetched(media: MediaServer) -> None:
    got = await SafeDownloader(policy(allow_private_hosts=("127.0.0.1",))).fetch(
        f"{media.base}/cat.png"
    )
    assert got.data == PNG
    assert got.content_type == "image/png"


async def test_loopback_refused_without_allowlist(media: MediaServer) -> None:
    with pytest.raises(DownloadRefused, match="not a public address"):
        await SafeDownloader(policy()).fetch(f"{media.base}/cat.png")
    assert media.hits == []  # refused before any connection


async def test_name_resolving_to_loopback_is_refused(media: MediaServer) -> None:
    resolver = MapResolver({"images.example": "127.0.0.1"})
    with pytest.raises(DownloadRefused, match="non-public address"):
        await SafeDownloader(policy(), resolver=resolver).fetch(
            f"http://images.example:{media.port}/cat.png"
        )
    assert resolver.asked == ["images.example"]
    assert media.hits == []


async def test_allowlisted_name_is_fetched_from_its_private_address(media: MediaServer) -> None:
    resolver = MapResolver({"napcat.local": "127.0.0.1"})
    downloader = SafeDownloader(policy(allow_private_hosts=("napcat.local",)), resolver=resolver)
    got = await downloader.fetch(f"http://napcat.local:{media.port}/cat.png")
    assert got.data == PNG


async def test_redirect_to_private_literal_is_refused(media: MediaServer) -> None:
    media.redirects["hop"] = "http://10.1.2.3/secret"
    downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",)))
    with pytest.raises(DownloadRefused, match="10.1.2.3 is not a public address"):
        await downloader.fetch(f"{media.base}/hop")
    assert media.hits == ["hop"]


async def test_redirect_to_name_resolving_private_is_refused(media: MediaServer) -> None:
    # the first hop is allowed by name; the redirect's host resolves to loopback too,
    # but it is not on the list, so the resolved-address check must stop it
    resolver = MapResolver({"napcat.local": "127.0.0.1", "metadata.example": "127.0.0.1"})
    media.redirects["hop"] = f"http://metadata.example:{media.port}/cat.png"
    downloader = SafeDownloader(policy(allow_private_hosts=("napcat.local",)), resolver=resolver)
    with pytest.raises(DownloadRefused, match="metadata.example"):
        await downloader.fetch(f"http://napcat.local:{media.port}/hop")
    assert media.hits == ["hop"]


async def test_redirect_within_allowed_host_is_followed(media: MediaServer) -> None:
    media.redirects["old.png"] = "/cat.png"
    got = await SafeDownloader(policy(allow_private_hosts=("127.0.0.1",))).fetch(
        f"{media.base}/old.png"
    )
    assert got.data == PNG
    assert got.url.endswith("/cat.png")


async def test_redirect_loop_is_cut(media: MediaServer) -> None:
    media.redirects["a"] = "/b"
    media.redirects["b"] = "/a"
    downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",), max_redirects=3))
    with pytest.raises(DownloadRefused, match="more than 3 redirects"):
        await downloader.fetch(f"{media.base}/a")
    assert len(media.hits) == 4


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/x", "gopher://x/", "not a url", "http://"],
)
async def test_non_http_urls_refused(url: str) -> None:
    with pytest.raises(DownloadRefused):
        await SafeDownloader(policy()).fetch(url)


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "[::1]",
        "[fd00::1]",
        "0.0.0.0",
        "224.0.0.1",
        "[::ffff:127.0.0.1]",
        "100.64.0.1",
        "192.168.1.10",
        "240.0.0.1",
    ],
)
async def test_special_addresses_refused(host: str) -> None:
    with pytest.raises(DownloadRefused):
        await SafeDownloader(policy()).fetch(f"http://{host}/x.png")


@pytest.mark.parametrize("url", ["http://localhost:9/x", "http://2130706433/x", "http://127.1/x"])
async def test_loopback_spellings_refused_via_real_resolution(url: str) -> None:
    with pytest.raises(DownloadRefused):
        await SafeDownloader(policy()).fetch(url)


def test_public_address_classification() -> None:
    assert is_public_address(ipaddress.ip_address("93.184.216.34"))
    assert is_public_address(ipaddress.ip_address("2606:4700::1111"))
    for private in (
        "127.0.0.1",
        "10.0.0.1",
        "172.16.0.1",
        "169.254.1.1",
        "::1",
        "fe80::1",
        "ff02::1",
        "224.0.0.251",
        "::ffff:10.0.0.1",
    ):
        assert not is_public_address(ipaddress.ip_address(private)), private


async def test_size_cap_by_content_length(media: MediaServer) -> None:
    downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",), max_bytes=1000))
    with pytest.raises(DownloadTooLarge):
        await downloader.fetch(f"{media.base}/big.bin")


async def test_size_cap_while_streaming() -> None:
    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()  # no Content-Length: the cap must hold mid-stream
        await response.prepare(request)
        for _ in range(20):
            await response.write(b"y" * 1000)
        return response

    app = web.Application()
    app.router.add_get("/stream", chunked)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",), max_bytes=3000))
        with pytest.raises(DownloadTooLarge):
            await downloader.fetch(f"http://127.0.0.1:{port}/stream")
    finally:
        await runner.cleanup()


async def test_total_timeout() -> None:
    import asyncio

    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(body=b"late")

    app = web.Application()
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",), timeout_s=0.2))
        with pytest.raises(DownloadError, match="timed out"):
            await downloader.fetch(f"http://127.0.0.1:{port}/slow")
    finally:
        release.set()
        await runner.cleanup()


async def test_http_error_status(media: MediaServer) -> None:
    downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",)))
    with pytest.raises(DownloadError, match="HTTP 404"):
        await downloader.fetch(f"{media.base}/missing.png?token=secret")


async def test_error_messages_do_not_leak_query_strings(media: MediaServer) -> None:
    downloader = SafeDownloader(policy(allow_private_hosts=("127.0.0.1",)))
    with pytest.raises(DownloadError) as info:
        await downloader.fetch(f"{media.base}/missing.png?token=secret")
    assert "secret" not in str(info.value)


def test_policy_rejects_nonpositive_cap() -> None:
    with pytest.raises(ValueError):
        DownloadPolicy(max_bytes=0)


def test_allowlist_accepts_networks() -> None:
    p = DownloadPolicy(max_bytes=10, allow_private_hosts=("172.17.0.0/16", "NapCat.Local."))
    assert p.address_allowed("anything", "172.17.0.5")
    assert not p.address_allowed("anything", "172.18.0.5")
    assert p.address_allowed("napcat.local", "10.0.0.9")
