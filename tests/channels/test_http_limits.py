"""Issue 24 item 3: slow and numerous clients on the HTTP port, over raw TCP on loopback.

The bounds are configured small (1 s, 3 connections); each test waits for the server
to act with a generous ceiling, so it fails only when the server never acts (before the
fix a trickling client stayed open for aiohttp's whole 75 s keep-alive time).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from channels.config import HttpConfig
from channels.http.channel import HttpChannel
from channels.http.server import PRESSURE_RATIO, descriptors
from core.messages import InboundMessage, Reply

CEILING_S = 15.0  # the server must have acted by then; it is configured to act after 1 s


async def echo(message: InboundMessage) -> Reply:
    return Reply(f"echo: {message.text}")


@pytest.fixture
async def channel() -> AsyncIterator[HttpChannel]:
    config = HttpConfig.model_validate(
        {
            "host": "127.0.0.1",
            "port": 0,
            "header_timeout_s": 1.0,
            "body_timeout_s": 1.0,
            "max_connections": 3,
        }
    )
    channel = HttpChannel(config, dict)
    await channel.start(echo)
    try:
        yield channel
    finally:
        await channel.stop()


async def connect(channel: HttpChannel) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", channel.port)


async def trickle_until_closed(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> bool:
    """Send a header a byte at a time (a byte every 0.2 s) until the server hangs up."""
    writer.write(b"POST /v1/chat HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    for _ in range(int(CEILING_S / 0.2)):
        try:
            writer.write(b"X")
            await writer.drain()
            data = await asyncio.wait_for(reader.read(1024), 0.2)
        except TimeoutError:
            continue
        except ConnectionError:
            return True
        if data == b"" or data.startswith(b"HTTP/1.1 4"):
            return True
    return False


async def test_a_client_trickling_its_headers_is_cut_off(channel: HttpChannel) -> None:
    reader, writer = await connect(channel)
    try:
        assert await trickle_until_closed(writer, reader)
    finally:
        writer.close()


async def test_an_idle_connection_is_closed(channel: HttpChannel) -> None:
    reader, writer = await connect(channel)
    try:
        assert await asyncio.wait_for(reader.read(), CEILING_S) == b""
    finally:
        writer.close()


async def test_a_slow_body_gets_408(channel: HttpChannel) -> None:
    reader, writer = await connect(channel)
    try:
        writer.write(
            b"POST /v1/chat HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user_id"'
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), CEILING_S)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    finally:
        writer.close()


async def test_connections_beyond_the_limit_are_told_to_come_back(channel: HttpChannel) -> None:
    held = [await connect(channel) for _ in range(3)]
    try:
        reader, writer = await connect(channel)
        answer = await asyncio.wait_for(reader.read(), CEILING_S)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer
        for _, idle in held:
            idle.close()
            await idle.wait_closed()
        # With the idle ones gone, a real request is served again.
        async with aiohttp.ClientSession() as session:
            for _ in range(50):  # the server notices the closes on its next loop turns
                async with session.get(f"http://127.0.0.1:{channel.port}/healthz") as response:
                    if response.status == 200:
                        body = await response.json()
                        break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("healthz never answered after the idle connections closed")
        assert body["http_connections"]["refused"] >= 1
    finally:
        for _, idle in held:
            idle.close()


async def test_healthz_reports_descriptor_pressure(channel: HttpChannel) -> None:
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{channel.port}/healthz"
        async with session.get(url) as response:
            body: dict[str, Any] = await response.json()
        assert body["status"] == "ok"
        assert body["descriptors"]["open"] > 0 and body["descriptors"]["pressure"] is False
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        now = descriptors().open
        assert now is not None
        lowered = now + 64
        opened: list[int] = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
        try:
            while len(opened) + now < lowered * PRESSURE_RATIO + 2:
                opened.append(os.open(os.devnull, os.O_RDONLY))
            async with session.get(url) as response:
                body = await response.json()
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert response.status == 200
    assert body["status"] == "degraded"
    assert body["descriptors"]["pressure"] is True
    assert body["descriptors"]["limit"] == lowered
