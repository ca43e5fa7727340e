"""The HTTP channel: a small JSON API for integrations, health checks and the benchmark.

`POST /v1/chat` hands one message to the daemon and answers with its reply in the same
response; `GET /healthz` reports every channel's state. Other parts of the daemon may add
their own routes to the same server (`registrars`: the operator's console does). HTTP is
request/response: the daemon sends its answer through `send()` like on every platform,
and `send()` hands it to the request waiting for it (a future per request, paired by
`request_id`). A message with no request waiting (the reply to a request that died in a
crash) is refused with DeliveryError; the caller's retry reads the stored reply.

Why it is strict: a typo'd field name ("chatid") would otherwise route a message into the
wrong conversation, and a huge body would be read into memory before anyone said no. So
unknown fields are refused, sizes are checked before the body is read, and every refusal
is a JSON `{"error": reason}` the caller can act on.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from channels.base import ChannelHealth, MessageHandler
from channels.config import HttpConfig
from core.inject import clean_name
from core.messages import (
    ChatType,
    DeliveryError,
    ImageRef,
    InboundMessage,
    OutboundMessage,
    Sent,
    TryLater,
)

log = logging.getLogger(__name__)

# Adds routes (or sub-applications) of another part of the daemon to this server before
# it starts, e.g. the operator's console: the channel serves them without knowing them.
RouteRegistrar = Callable[[web.Application], None]

PLATFORM = "http"
MAX_TEXT_CHARS = 16_000
MAX_ID_CHARS = 128
_FIELDS = {
    "user_id",
    "chat_id",
    "chat_type",
    "sender_name",
    "text",
    "message_id",
    "mentions_bot",
    "reply_to_bot",
}


class RequestError(Exception):
    """A refusal the caller caused; its text is safe to send back."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class ChatRequest:
    """A validated `POST /v1/chat` body."""

    user_id: str
    chat_id: str
    chat_type: ChatType
    sender_name: str
    text: str
    message_id: str | None = None
    mentions_bot: bool = False
    reply_to_bot: bool = False

    def to_inbound(self, request_id: str | None = None) -> InboundMessage:
        return InboundMessage(
            platform=PLATFORM,
            chat_id=self.chat_id,
            chat_type=self.chat_type,
            sender_id=self.user_id,
            sender_name=self.sender_name,
            text=self.text,
            message_id=self.message_id,
            mentions_bot=self.mentions_bot,
            reply_to_bot=self.reply_to_bot,
            request_id=request_id,
        )


def parse_chat_request(body: bytes) -> ChatRequest:
    """Validate a request body; raise RequestError(400/413) naming what is wrong."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(400, f"body is not valid JSON: {_short(exc)}") from None
    except RecursionError:
        raise RequestError(400, "body is not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise RequestError(400, "body must be a JSON object")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise RequestError(400, f"unknown field(s): {', '.join(unknown)}")

    user_id = _id_field(data, "user_id", required=True)
    assert user_id is not None
    chat_type_raw = data.get("chat_type")
    if chat_type_raw is None:
        raise RequestError(400, "missing field: chat_type")
    if chat_type_raw not in ("private", "group"):
        raise RequestError(400, 'chat_type must be "private" or "group"')
    chat_type = ChatType(chat_type_raw)
    chat_id = _id_field(data, "chat_id", required=chat_type is ChatType.GROUP)
    text = data.get("text")
    if text is None:
        raise RequestError(400, "missing field: text")
    if not isinstance(text, str):
        raise RequestError(400, "text must be a string")
    if len(text) > MAX_TEXT_CHARS:
        raise RequestError(413, f"text is longer than {MAX_TEXT_CHARS} characters")
    text = clean_text(text)
    if not text.strip():
        raise RequestError(400, "text is empty")
    sender_name = data.get("sender_name")
    if sender_name is not None and not isinstance(sender_name, str):
        raise RequestError(400, "sender_name must be a string")
    return ChatRequest(
        user_id=user_id,
        chat_id=chat_id or user_id,
        chat_type=chat_type,
        sender_name=clean_name(sender_name, fallback=user_id),
        text=text,
        message_id=_id_field(data, "message_id", required=False),
        mentions_bot=_bool_field(data, "mentions_bot"),
        reply_to_bot=_bool_field(data, "reply_to_bot"),
    )


def clean_text(text: str) -> str:
    """Drop what no store can hold: NUL (PostgreSQL refuses it) and lone surrogates."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _id_field(data: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise RequestError(400, f"missing field: {key}")
        return None
    # Integrations often hold numeric ids; accept them, but not floats or booleans.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RequestError(400, f"{key} must be a string or an integer")
    text = str(value)
    if not text.strip() or len(text) > MAX_ID_CHARS or not text.isprintable():
        raise RequestError(400, f"{key} must be 1-{MAX_ID_CHARS} printable characters")
    return text


def _bool_field(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise RequestError(400, f"{key} must be true or false")
    return value


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120]


def _error(status: int, reason: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"error": reason}, status=status, headers=headers)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


class HttpChannel:
    """Channel Protocol implementation serving the JSON API on aiohttp.web."""

    name = "http"
    pushes = False  # send() only answers a request still waiting for it

    def __init__(
        self,
        config: HttpConfig,
        health_source: Callable[[], Mapping[str, ChannelHealth]],
        *,
        max_body_bytes: int = 64 * 1024,
        extra_health: Callable[[], Awaitable[dict[str, Any]]] | None = None,
        registrars: Sequence[RouteRegistrar] = (),
    ) -> None:
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be positive")
        self._config = config
        self._health_source = health_source
        self._extra_health = extra_health
        self._registrars = tuple(registrars)
        self._max_body = max_body_bytes
        self._token = config.token.get_secret_value().encode() if config.token else None
        self._handler: MessageHandler | None = None
        self._runner: web.AppRunner | None = None
        self._health = ChannelHealth()
        # The requests waiting for their answer, by request_id; send() resolves them.
        self._waiting: dict[str, asyncio.Future[OutboundMessage]] = {}
        self.port: int | None = None

    async def start(self, handler: MessageHandler) -> None:
        """Bind and serve; with `[http] port = 0` the kernel picks a port, see `.port`."""
        if self._runner is not None:
            raise RuntimeError("HTTP channel already started")
        self._handler = handler
        app = web.Application(client_max_size=self._max_body, middlewares=[_json_errors])
        app.router.add_post("/v1/chat", self._chat)
        app.router.add_get("/healthz", self._healthz)
        for register in self._registrars:
            register(app)
        # No access log: the benchmark pushes hundreds of requests a second through here.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._config.host, self._config.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self._health = ChannelHealth(state="running", last_ok=datetime.now(UTC))
        log.info("HTTP API listening on http://%s:%d", self._config.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        self._health = ChannelHealth(state="stopped", last_ok=self._health.last_ok)
        if runner is not None:
            await runner.cleanup()

    async def send(self, message: OutboundMessage) -> Sent:
        """Hand `message` to the request waiting for it. DeliveryError when none waits
        (its request is gone): the caller's retry with the same message_id reads it."""
        waiting = self._waiting.get(message.request_id) if message.request_id else None
        if waiting is None or waiting.done():
            raise DeliveryError("no HTTP request is waiting; the caller's retry reads the reply")
        waiting.set_result(message)
        return Sent()

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        return None  # the HTTP API takes no images

    def health(self) -> ChannelHealth:
        return self._health

    async def _chat(self, request: web.Request) -> web.Response:
        refusal = self._check_token(request)
        if refusal is not None:
            return refusal
        try:
            body = await self._read_body(request)
            chat = parse_chat_request(body)
        except RequestError as exc:
            return _error(exc.status, exc.reason)
        handler = self._handler
        if handler is None:
            return _error(503, "channel is stopping")
        request_id = uuid.uuid4().hex
        answer: asyncio.Future[OutboundMessage] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        try:
            await handler(chat.to_inbound(request_id))
        except TryLater as later:
            return _error(
                503,
                "restarting: the message is kept; send it again with the same message_id",
                headers={"Retry-After": str(round(later.retry_after_s))},
            )
        except Exception:
            log.exception("handler failed on an HTTP message for chat %s", chat.chat_id)
            return _error(500, "internal error")
        finally:
            del self._waiting[request_id]
        self._health.last_ok = datetime.now(UTC)
        if not answer.done():
            return web.json_response({"reply": None})
        reply = answer.result()
        return web.json_response({"reply": reply.text, "private": reply.private_to is not None})

    async def _healthz(self, request: web.Request) -> web.Response:
        try:
            channels = dict(self._health_source())
        except Exception:
            log.exception("health source failed")
            return _error(500, "internal error")
        degraded = any(h.state == "reconnecting" for h in channels.values())
        body: dict[str, Any] = {
            "status": "degraded" if degraded else "ok",
            "channels": {
                name: {"state": h.state, "last_ok": _iso(h.last_ok)}
                for name, h in sorted(channels.items())
            },
        }
        if self._extra_health is not None:
            try:
                body |= await self._extra_health()
            except Exception:
                log.exception("health details failed")
        return web.json_response(body)

    def _check_token(self, request: web.Request) -> web.Response | None:
        if self._token is None:
            return None
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("utf-8", "replace"), self._token
        )
        if ok:
            return None
        return _error(
            401,
            "missing or wrong bearer token",
            headers={"WWW-Authenticate": 'Bearer realm="chatterd"'},
        )

    async def _read_body(self, request: web.Request) -> bytes:
        """Read at most max_body_bytes; say 413 before reading more than that."""
        too_big = RequestError(413, f"body is larger than {self._max_body} bytes")
        if request.content_length is not None and request.content_length > self._max_body:
            raise too_big
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = await request.content.read(min(65536, self._max_body + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > self._max_body:
                raise too_big
        return b"".join(chunks)


@web.middleware
async def _json_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Make aiohttp's own refusals (404, 405) JSON like ours."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason, headers=_allow_header(exc))


def _allow_header(exc: web.HTTPException) -> Mapping[str, str] | None:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else None
