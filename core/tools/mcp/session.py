"""One long-lived MCP session per server, owned by one task for the daemon's life.

Why one owner task: the SDK's transports are anyio context managers that must be entered
and left in the same task (leaving `stdio_client` closes the server's stdin, which ends
it). The task connects, pings, reconnects with backoff when the session dies, and on
`close()` leaves every context it entered; callers only borrow the session.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, Implementation

from core.tools.mcp.config import McpServerConfig

log = logging.getLogger(__name__)

State = Literal["starting", "ready", "down", "stopped"]
PING_EVERY_S = 30.0
MAX_BACKOFF_S = 60.0
CLIENT = Implementation(name="chatterd", version="0.1")
GROUP_LAUNCHER = "core.tools.mcp.group"


class ServerDown(Exception):
    """The server is not connected (and a reconnect did not bring it back in time)."""


@dataclass(frozen=True)
class ToolInfo:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool


class ServerLink:
    """One server: its session, its tools, its state."""

    def __init__(self, name: str, config: McpServerConfig, connect_timeout_s: float) -> None:
        self.name = name
        self.config = config
        self.state: State = "starting"
        self.tools: list[ToolInfo] = []
        self.error = ""
        self.connects = 0
        self._connect_timeout = connect_timeout_s
        self._session: ClientSession | None = None
        self._generation = 0
        self._tried = asyncio.Event()  # the first attempt finished, well or not
        self._settled = asyncio.Event()  # replaced after each connect attempt
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def transport(self) -> str:
        return "stdio" if self.config.command else self.config.transport

    def start(self) -> None:
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")

    async def started(self) -> None:
        await self._tried.wait()

    async def close(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            log.warning("mcp server %s did not close in %gs; cancelling", self.name, timeout_s)
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "state": self.state,
            "transport": self.transport,
            "tools": len(self.tools),
            "connects": self.connects,
        }
        if self.error:
            out["error"] = self.error
        return out

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """tools/call; a dead session is reconnected and the call tried once more.
        The caller bounds the whole of it with its timeout."""
        for attempt in (1, 2):
            session, generation = self._session, self._generation
            if session is None:
                if self.state == "stopped":
                    raise ServerDown("the daemon is stopping")
                settled = self._settled
                self._wake.set()  # down and backing off: try now, someone is waiting
                await settled.wait()
                session, generation = self._session, self._generation
                if session is None:
                    raise ServerDown(self.error or "not connected")
            try:
                return await session.call_tool(tool, arguments)
            except MCPError as exc:
                if not _session_gone(exc) or attempt == 2:
                    raise
                reason = str(exc)
            except (ValueError, TypeError):
                raise  # the server's answer did not validate: not a dead connection
            except Exception as exc:  # closed or broken streams, pipes, HTTP transport errors
                if attempt == 2:
                    raise ServerDown(short_error(exc)) from exc
                reason = short_error(exc)
            log.info("mcp server %s: call failed (%s); reconnecting", self.name, reason)
            settled = self._settled
            self._reconnect(generation)
            await settled.wait()
        raise ServerDown(self.error or "not connected")

    def _settle(self) -> None:
        """Wake everyone waiting for the outcome of a connect attempt."""
        done, self._settled = self._settled, asyncio.Event()
        done.set()

    def _reconnect(self, generation: int) -> None:
        """Drop the session `generation` (if it is still the current one) and reconnect."""
        if generation == self._generation and self._session is not None:
            self._session = None
            self._wake.set()

    # -- the owner task -----------------------------------------------------------------

    async def _own(self) -> None:
        delay = 1.0
        while not self._stop.is_set():
            self._wake.clear()
            try:
                async with AsyncExitStack() as stack:
                    await self._connect(stack)
                    delay = 1.0
                    await self._serve()
            except Exception as exc:  # noqa: BLE001 - a server's failure never ends the daemon
                self.error = short_error(exc)
                log.warning("mcp server %s is down: %s", self.name, self.error)
            finally:
                self._session = None
                self._tried.set()
            if self._stop.is_set():
                break
            if self.state != "ready":  # failed to connect: back off (a waiting call wakes it)
                self.state = "down"
                self._settle()
                await self._sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
            else:
                self.state = "starting"  # it was up and died or was dropped: at once
                await self._sleep(0.2)
        self.state = "stopped"
        self._session = None
        self._settle()  # nobody waits forever on a stopped server

    async def _connect(self, stack: AsyncExitStack) -> None:
        self.state = "starting" if self.state != "ready" else self.state
        async with asyncio.timeout(self._connect_timeout):
            read, write = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(
                ClientSession(read, write, client_info=CLIENT)
            )
            await session.initialize()
            tools = await _list_tools(self.name, session)
        wanted = self.config.tools
        self.tools = [t for t in tools if wanted is None or t.name in wanted]
        self._generation += 1
        self._session = session
        self.connects += 1
        self.state = "ready"
        self.error = ""
        self._wake.clear()  # a request made while connecting is answered by this session
        self._tried.set()
        self._settle()
        log.info("mcp server %s ready: %d tool(s)", self.name, len(self.tools))

    async def _serve(self) -> None:
        """Hold the session until stop, a reconnect request, or a failed ping."""
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._wake.wait(), PING_EVERY_S)
            except TimeoutError:
                session = self._session
                if session is None:
                    return
                try:
                    async with asyncio.timeout(min(10.0, self._connect_timeout)):
                        await session.send_ping()
                except Exception as exc:  # noqa: BLE001
                    log.info(
                        "mcp server %s did not answer a ping (%s)", self.name, short_error(exc)
                    )
                    return
                continue
            return

    async def _sleep(self, seconds: float) -> None:
        """Sleep, unless stopped or woken by a call that needs the server now."""
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except TimeoutError:
            pass

    @asynccontextmanager
    async def _transport(self) -> Any:
        config = self.config
        if config.command:
            env = dict(os.environ) | {k: v.get_secret_value() for k, v in config.env.items()}
            # Through the group launcher: the server's children end with it (group.py).
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", GROUP_LAUNCHER, config.command, *config.args],
                env=env,
                cwd=config.cwd,
            )
            async with stdio_client(params) as streams:
                yield streams
            return
        assert config.url is not None
        headers = {k: v.get_secret_value() for k, v in config.headers.items()}
        if config.transport == "sse":
            async with sse_client(config.url, headers=headers) as streams:
                yield streams
            return
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(config.url, http_client=client) as streams:
                yield streams


async def _list_tools(server: str, session: ClientSession) -> list[ToolInfo]:
    found: list[ToolInfo] = []
    cursor: str | None = None
    for _ in range(50):  # pages; a server that never stops paging is cut off
        if cursor is None:
            page = await session.list_tools()
        else:
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        for tool in page.tools:
            hints = tool.annotations
            found.append(
                ToolInfo(
                    server=server,
                    name=tool.name,
                    description=(tool.description or tool.title or "").strip(),
                    input_schema=dict(tool.input_schema or {}),
                    read_only=bool(hints is not None and hints.read_only_hint),
                )
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return found


def _session_gone(exc: MCPError) -> bool:
    """The connection closed, or an HTTP server no longer knows our session (it restarted
    or expired it: 404 "Session not found" / "Session terminated")."""
    if exc.code == CONNECTION_CLOSED:
        return True
    text = exc.message.casefold()
    return "session" in text and any(w in text for w in ("not found", "terminated", "expired"))


def short_error(exc: BaseException) -> str:
    """One line about a failure, from inside exception groups too; never a header."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
