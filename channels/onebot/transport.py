"""OneBot v11 WebSocket transports: one connection object, two ways to get one.

Reverse (default): chatterd listens, the implementation (NapCat, Lagrange, go-cqhttp)
connects as a Universal client with `X-Self-ID` and `Authorization: Bearer <token>`.
Forward: chatterd connects out to the implementation's WebSocket server, reconnecting
with backoff. Either way the rest of the channel sees an `OneBotConnection`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp
from aiohttp import WSMsgType, web

from channels.onebot.actions import ActionClient, AnswerTooLarge, is_response

log = logging.getLogger(__name__)


class FrameHandler(Protocol):
    """Takes one frame; `oversize` is the frame's size when its long strings were cut."""

    def __call__(
        self, conn: OneBotConnection, frame: dict[str, Any], oversize: int | None = None
    ) -> None: ...


ConnectionHandler = Callable[["OneBotConnection"], Awaitable[None]]

# Three sizes, because aiohttp cannot skip one oversized WebSocket message: past its
# `max_msg_size` it fails the whole socket (close code 1009) and every message after it.
# So the socket takes up to MAX_SOCKET_BYTES and we judge each frame ourselves: an event
# over MAX_FRAME_BYTES is skipped with a log line; an answer to one of our own actions
# (get_file's base64 body) may be up to MAX_ANSWER_BYTES, which holds the base64 of any
# file within the files cap; a larger answer fails that one action. An event over
# MAX_FRAME_BYTES is read with every long string cut (see `cut_strings`), so a huge
# message is still answered from its start. Only a frame over MAX_SOCKET_BYTES still
# ends the link (the implementation reconnects).
MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_SOCKET_BYTES = 64 * 1024 * 1024
_MIB = 1024 * 1024
# A top-level-or-nested `"echo": "..."` key; inside a JSON string the quotes would be
# escaped, so this only finds real keys. Read only from frames too large to parse.
_ECHO = re.compile(r'"echo"\s*:\s*"([^"\\]{1,200})"')
# One JSON string literal; outside strings valid JSON has no quote, so scanning from the
# start finds exactly the literals. The unrolled form keeps the regex linear.
_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
DEFAULT_KEEP_CHARS = 64 * 1024
CLOSE_REPLACED = 4000  # application close code: a newer connection took over


class OneBotConnection:
    """One live WebSocket to a OneBot implementation: reads frames, routes responses."""

    def __init__(
        self,
        ws: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
        *,
        self_id: str | None,
        action_timeout_s: float,
        heartbeat_grace: float = 3.0,
        label: str = "",
        keep_chars: int = DEFAULT_KEEP_CHARS,
    ) -> None:
        """`keep_chars`: how much of each long string an oversized event keeps."""
        self.ws = ws
        self._keep_chars = keep_chars
        self.self_id = self_id
        self.label = label
        self.actions = ActionClient(self._send_json, timeout_s=action_timeout_s)
        self.last_seen = time.monotonic()
        self.heartbeat_interval_s: float | None = None
        self._grace = heartbeat_grace
        self.nickname: str | None = None  # the account's, from get_login_info
        # False once the implementation said it has no merged-forward send (asked once
        # per connection: a reconnect may be a different or upgraded implementation).
        self.forward_supported: bool | None = None

    @property
    def closed(self) -> bool:
        return self.ws.closed

    def stale(self, now: float | None = None) -> bool:
        """No frame for `grace` heartbeat intervals: the implementation is gone."""
        if self.heartbeat_interval_s is None:
            return False
        now = time.monotonic() if now is None else now
        return now - self.last_seen > self._grace * self.heartbeat_interval_s

    async def _send_json(self, frame: dict[str, Any]) -> None:
        if self.ws.closed:
            raise ConnectionError("connection is closed")
        await self.ws.send_str(json.dumps(frame, ensure_ascii=False))

    async def run(self, on_frame: FrameHandler) -> None:
        """Read until the socket closes; events go to `on_frame` (which must not block)."""
        try:
            while not self.ws.closed:
                msg = await self._receive()
                if msg is None:
                    break
                if msg.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                    self._on_data(msg.data, on_frame)
                elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
                    break
                elif msg.type is WSMsgType.ERROR:  # a frame over MAX_SOCKET_BYTES lands here
                    log.warning("onebot%s: websocket error: %s", self.label, self.ws.exception())
                    break
        finally:
            self.actions.close("connection closed")
            if not self.ws.closed:
                await self.ws.close()

    async def _receive(self) -> aiohttp.WSMessage | None:
        timeout = None
        if self.heartbeat_interval_s is not None:
            timeout = self._grace * self.heartbeat_interval_s
        try:
            return await self.ws.receive(timeout=timeout)
        except TimeoutError:
            log.warning(
                "onebot%s: no frame for %.1fs (heartbeat every %.1fs); closing",
                self.label,
                timeout,
                self.heartbeat_interval_s,
            )
            return None

    def _on_data(self, data: str | bytes, on_frame: FrameHandler) -> None:
        """One frame in. A frame we cannot read or handle is skipped with one log line:
        whatever it holds (nesting deeper than the parser's recursion limit, ids of the
        wrong type), it must never end the link and the account's other messages."""
        oversize = len(data) if len(data) > MAX_FRAME_BYTES else None
        try:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            if oversize is not None:
                answer = self._large_answer(text, oversize)
                if answer is False:
                    return
                if answer:
                    oversize = None  # an answer we wait for: read whole
                else:
                    cut = self._cut_event(text, oversize)
                    if cut is None:
                        return
                    text = cut
            frame = json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            log.warning("onebot%s: malformed frame ignored (%s)", self.label, exc)
            return
        except RecursionError:
            log.warning("onebot%s: frame nested too deeply; ignored", self.label)
            return
        if not isinstance(frame, dict):
            log.warning("onebot%s: non-object frame ignored", self.label)
            return
        self.last_seen = time.monotonic()
        try:
            if is_response(frame):
                self.actions.on_response(frame)
                return
            on_frame(self, frame, oversize)
        except Exception as exc:  # one bad frame, never the whole link
            log.warning(
                "onebot%s: frame skipped: %s while handling it", self.label, type(exc).__name__
            )

    def _cut_event(self, text: str, size: int) -> str | None:
        """An event over MAX_FRAME_BYTES with every long string cut; None (skipped with
        a log line) when even that is over the cap: a frame of many small pieces."""
        cut = cut_strings(text, self._keep_chars)
        if len(cut) > MAX_FRAME_BYTES:
            log.warning(
                "onebot%s: frame of %.1f MiB skipped: over the %d MiB frame cap",
                self.label,
                size / _MIB,
                MAX_FRAME_BYTES // _MIB,
            )
            return None
        log.warning(
            "onebot%s: frame of %.1f MiB is over the %d MiB frame cap: read with its long "
            "strings cut",
            self.label,
            size / _MIB,
            MAX_FRAME_BYTES // _MIB,
        )
        return cut

    def _large_answer(self, text: str, size: int) -> bool | None:
        """A frame over MAX_FRAME_BYTES: None when it is no answer to an action we wait
        for; True to read it whole (within MAX_ANSWER_BYTES); False when it is too large:
        it fails its own action at once (not after the timeout) and is dropped."""
        found = _ECHO.search(text)
        echo = found.group(1) if found else None
        if echo is None or not self.actions.waiting(echo):
            return None
        if size <= MAX_ANSWER_BYTES:
            return True
        log.warning(
            "onebot%s: answer of %.1f MiB refused: over the %d MiB answer cap",
            self.label,
            size / _MIB,
            MAX_ANSWER_BYTES // _MIB,
        )
        self.actions.fail(
            echo, AnswerTooLarge(f"its answer is over {MAX_ANSWER_BYTES // _MIB} MiB")
        )
        return False

    async def close(self, reason: str, code: int = aiohttp.WSCloseCode.GOING_AWAY) -> None:
        self.actions.close(reason)
        if not self.ws.closed:
            await self.ws.close(code=code, message=reason.encode()[:120])


def cut_strings(text: str, keep: int) -> str:
    """JSON text with every string literal over `keep` characters cut to its start (still
    valid JSON): ids, types and the start of the message survive, the bulk does not."""

    def cut(found: re.Match[str]) -> str:
        literal = found.group(0)
        if len(literal) <= keep + 2:
            return literal
        body = literal[1 : keep + 1]
        for trim in range(7):  # an escape cut in half (`\\u12`) is dropped whole
            head = body[: len(body) - trim]
            try:
                json.loads(f'"{head}"')
            except ValueError:
                continue
            return f'"{head}"'
        return '""'

    return _LITERAL.sub(cut, text)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and value:
        return value.strip()
    return request.query.get("access_token")


class ReverseServer:
    """The endpoint implementations connect to; checks the token before upgrading."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        path: str,
        access_token: str | None,
        make_connection: Callable[[web.WebSocketResponse, str | None], OneBotConnection],
        on_connection: ConnectionHandler,
    ) -> None:
        self._host, self._port = host, port
        self._path = path if path.startswith("/") else "/" + path
        self._token = access_token or None
        self._make = make_connection
        self._on_connection = on_connection
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(self._path, self._handle)
        if not self._path.endswith("/"):  # go-cqhttp users often add a trailing slash
            app.router.add_get(self._path + "/", self._handle)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=2)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.bound_port = _port_of(runner)
        log.info(
            "onebot: listening for reverse WebSocket on %s:%s%s",
            self._host,
            self.bound_port,
            self._path,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        peer = request.remote or "?"
        if self._token is not None:
            given = _bearer(request)
            if given is None or not hmac.compare_digest(given.encode(), self._token.encode()):
                log.warning(
                    "onebot: connection from %s refused: %s access token",
                    peer,
                    "missing" if given is None else "wrong",
                )
                raise web.HTTPUnauthorized(text="access token missing or wrong\n")
        role = request.headers.get("X-Client-Role", "Universal")
        if role.lower() != "universal":
            log.warning("onebot: %s connected as %r; only Universal is supported", peer, role)
            raise web.HTTPBadRequest(text="configure a Universal reverse WebSocket client\n")
        self_id = request.headers.get("X-Self-ID", "").strip() or None
        if self_id is not None and not self_id.isdigit():
            raise web.HTTPBadRequest(text="X-Self-ID must be a QQ number\n")
        ws = web.WebSocketResponse(max_msg_size=MAX_SOCKET_BYTES)
        await ws.prepare(request)
        log.info("onebot: implementation connected from %s (self id %s)", peer, self_id or "?")
        await self._on_connection(self._make(ws, self_id))
        return ws


def _port_of(runner: web.AppRunner) -> int | None:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return None


class ForwardClient:
    """Connects out to the implementation's WebSocket server, reconnecting with backoff."""

    def __init__(
        self,
        *,
        url: str,
        access_token: str | None,
        make_connection: Callable[[aiohttp.ClientWebSocketResponse], OneBotConnection],
        on_connection: ConnectionHandler,
        backoff_min_s: float = 1.0,
        backoff_max_s: float = 60.0,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self._url = url
        self._token = access_token or None
        self._make = make_connection
        self._on_connection = on_connection
        self._min, self._max = backoff_min_s, max(backoff_max_s, backoff_min_s)
        self._connect_timeout = connect_timeout_s
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.attempts = 0

    async def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._loop(), name="onebot-forward")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _loop(self) -> None:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        delay = self._min
        timeout = aiohttp.ClientWSTimeout(ws_close=5.0)
        async with aiohttp.ClientSession(trust_env=False) as session:
            while not self._stopping.is_set():
                self.attempts += 1
                try:
                    async with asyncio.timeout(self._connect_timeout):
                        ws = await session.ws_connect(
                            self._url,
                            headers=headers,
                            timeout=timeout,
                            max_msg_size=MAX_SOCKET_BYTES,
                            autoping=True,
                        )
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    log.warning(
                        "onebot: cannot connect to %s: %s; retrying in %.1fs",
                        _shown(self._url),
                        _reason(exc),
                        delay,
                    )
                else:
                    delay = self._min
                    log.info("onebot: connected to %s", _shown(self._url))
                    await self._on_connection(self._make(ws))
                    if self._stopping.is_set():
                        break
                    log.warning(
                        "onebot: connection to %s lost; reconnecting in %.1fs",
                        _shown(self._url),
                        delay,
                    )
                try:
                    async with asyncio.timeout(delay):
                        await self._stopping.wait()
                except TimeoutError:
                    pass
                delay = min(delay * 2, self._max)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.WSServerHandshakeError) and exc.status == 401:
        return "access token rejected (HTTP 401)"
    if isinstance(exc, aiohttp.WSServerHandshakeError):
        return f"handshake failed (HTTP {exc.status})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def _shown(url: str) -> str:
    """Never log a token passed as ?access_token=."""
    return url.split("?", 1)[0]
