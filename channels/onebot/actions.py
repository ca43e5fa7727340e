"""OneBot v11 actions over one WebSocket: `{action, params, echo}` out, matched by echo.

Why echo matching: events and action responses share the socket and responses may come
back in any order; each request waits on its own future, with a timeout, and every
pending request fails at once (not after its timeout) when the connection drops.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

SendJson = Callable[[dict[str, Any]], Awaitable[None]]


class OneBotError(Exception):
    """Base for action failures."""


class ActionFailed(OneBotError):
    """The implementation answered `status: failed` (or an unusable response)."""

    def __init__(self, action: str, retcode: Any, message: str = "") -> None:
        self.action, self.retcode, self.message = action, retcode, message
        detail = f": {message}" if message else ""
        super().__init__(f"{action} failed (retcode {retcode}){detail}")


class ActionTimeout(OneBotError):
    """No response with our echo arrived in time."""


class AnswerTooLarge(OneBotError):
    """The answer arrived but was larger than the connection reads; skipped unread."""


class ConnectionLost(OneBotError):
    """The connection closed (or was replaced) before the response arrived."""


class ActionClient:
    """Sends actions on one connection and routes responses back by echo."""

    def __init__(self, send_json: SendJson, *, timeout_s: float) -> None:
        self._send_json = send_json
        self._timeout_s = timeout_s
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # A random prefix keeps echoes unique across reconnects and daemon restarts.
        self._prefix = secrets.token_hex(4)
        self._counter = itertools.count(1)
        self._closed: OneBotError | None = None

    async def call(
        self, action: str, params: dict[str, Any] | None = None, *, timeout_s: float | None = None
    ) -> Any:
        """Run one action and return its `data`; raise a OneBotError subclass otherwise."""
        if self._closed is not None:
            raise ConnectionLost(f"{action}: {self._closed}")
        echo = f"{self._prefix}-{next(self._counter)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[echo] = future
        try:
            try:
                await self._send_json({"action": action, "params": params or {}, "echo": echo})
            except (ConnectionError, RuntimeError) as exc:  # aiohttp: closing transport
                raise ConnectionLost(f"{action}: could not send ({exc})") from None
            limit = self._timeout_s if timeout_s is None else timeout_s
            try:
                async with asyncio.timeout(limit):
                    response = await future
            except TimeoutError:
                raise ActionTimeout(f"{action}: no response within {limit:g}s") from None
        finally:
            self._pending.pop(echo, None)
        return _unwrap(action, response)

    def on_response(self, frame: dict[str, Any]) -> bool:
        """Hand a response frame in; True if it belonged to a pending request."""
        echo = frame.get("echo")
        if not isinstance(echo, str):
            return False
        future = self._pending.get(echo)
        if future is None:
            log.debug("onebot: response for unknown echo %r ignored", echo)
            return False
        if not future.done():
            future.set_result(frame)
        return True

    def waiting(self, echo: str) -> bool:
        """Whether a request with this echo still waits for its answer."""
        future = self._pending.get(echo)
        return future is not None and not future.done()

    def fail(self, echo: str, error: OneBotError) -> None:
        """End one waiting request with `error` (its answer could not be read)."""
        future = self._pending.get(echo)
        if future is not None and not future.done():
            future.set_exception(error)

    def close(self, reason: str) -> None:
        """Fail every pending request now and refuse new ones."""
        self._closed = ConnectionLost(reason)
        for echo, future in list(self._pending.items()):
            if not future.done():
                future.set_exception(ConnectionLost(f"{reason} (request {echo})"))
        self._pending.clear()


def is_response(frame: dict[str, Any]) -> bool:
    """Responses carry `status`/`retcode`; events carry `post_type`."""
    return "post_type" not in frame and ("status" in frame or "retcode" in frame)


def _unwrap(action: str, response: dict[str, Any]) -> Any:
    status = response.get("status")
    if status in ("ok", "async"):
        return response.get("data")
    message = response.get("wording") or response.get("message") or response.get("msg") or ""
    raise ActionFailed(action, response.get("retcode"), str(message)[:200])
