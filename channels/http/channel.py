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
is a JSON `{"error": reason}` the caller can act on. Hostile callers (issue 24): a web
page in the operator's browser is refused (`channels/http/guard.py`, JSON only), message
ids are scoped to their sender, a private chat is its user's alone, and slow or numerous
connections are bounded (`channels/http/server.py`).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from channels.base import ChannelHealth, MessageHandler, TextOnly
from channels.config import HttpConfig
from channels.http.guard import KnownHosts, cross_site_reason, foreign_host_reason
from channels.http.push import HttpPush
from channels.http.request import PLATFORM, ChatRequest, RequestError, parse_chat_request
from channels.http.server import (
    LARGER_BODIES,
    ConnectionCap,
    body_deadline,
    descriptors,
    fitting_connections,
)
from core.messages import ChatType, DeliveryError, OutboundMessage, Sent, TryLater

log = logging.getLogger(__name__)

LINGER_S = 2.0

# Adds routes (or sub-applications) of another part of the daemon to this server before
# it starts, e.g. the operator's console: the channel serves them without knowing them.
RouteRegistrar = Callable[[web.Application], None]


def _error(status: int, reason: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"error": reason}, status=status, headers=headers)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


class HttpChannel(TextOnly):
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
        chat_owner: Callable[[str, str, str], Awaitable[str]] | None = None,
    ) -> None:
        """`chat_owner(platform, named_id, user_id)`: the owner of a private chat id,
        binding it to `user_id` when it has none (memory/chats/owners.py); None: private
        thread ids are refused (no storage to bind them in)."""
        if max_body_bytes < 1:
            raise ValueError("max_body_bytes must be positive")
        self._config = config
        self._health_source = health_source
        self._extra_health = extra_health
        self._registrars = tuple(registrars)
        self._chat_owner = chat_owner
        self._max_body = max_body_bytes
        self._token = config.token.get_secret_value().encode() if config.token else None
        # Reminders here go to `[http] push_url` (send() below), when it is set.
        self.push = HttpPush(config.push_url, self._token) if config.push_url else None
        self._handler: MessageHandler | None = None
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self._cap: ConnectionCap | None = None
        self._health = ChannelHealth()
        # The requests waiting for their answer, by request_id; send() resolves them.
        self._waiting: dict[str, asyncio.Future[OutboundMessage]] = {}
        self.port: int | None = None

    async def start(self, handler: MessageHandler) -> None:
        """Bind and serve; with `[http] port = 0` the kernel picks a port, see `.port`."""
        if self._runner is not None:
            raise RuntimeError("HTTP channel already started")
        self._handler = handler
        config = self._config
        app = web.Application(
            client_max_size=self._max_body,
            middlewares=[
                _json_errors,
                known_hosts_only(KnownHosts.of(config.host, config.public_url)),
                body_deadline(config.body_timeout_s, json_paths=frozenset({"/v1/chat"})),
            ],
        )
        app.router.add_post("/v1/chat", self._chat)
        app.router.add_get("/healthz", self._healthz)
        app[LARGER_BODIES] = {}  # a registrar's upload path may take more
        for register in self._registrars:
            register(app)
        # No access log: the benchmark pushes hundreds of requests a second through here.
        # keepalive_timeout bounds the wait for a complete request (channels/http/server.py).
        # lingering_time: how long a refused body is still drained (aiohttp's 10 s default
        # would let a trickling client hold its connection that much longer).
        runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=5.0,
            keepalive_timeout=config.header_timeout_s,
            lingering_time=LINGER_S,
        )
        await runner.setup()
        assert runner.server is not None
        self._cap = ConnectionCap(runner.server, fitting_connections(config.max_connections))
        try:
            listener = await asyncio.get_running_loop().create_server(
                self._cap, config.host, config.port, reuse_address=True
            )
        except BaseException:
            await runner.cleanup()
            raise
        self._listener = listener
        self._runner = runner
        self.port = int(listener.sockets[0].getsockname()[1])
        self._health = ChannelHealth(state="running", last_ok=datetime.now(UTC))
        log.info("HTTP API listening on http://%s:%d", self._config.host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        listener, self._listener = self._listener, None
        self._health = ChannelHealth(state="stopped", last_ok=self._health.last_ok)
        if listener is not None:
            listener.close()  # no new connections; the runner then ends the open ones
        if runner is not None:
            await runner.cleanup()
        if listener is not None:
            await listener.wait_closed()

    async def send(self, message: OutboundMessage) -> Sent:
        """Hand `message` to the request waiting for it. DeliveryError when none waits
        (its request is gone): the caller's retry with the same message_id reads it."""
        proactive = message.reminder_id is not None or message.occurrence_id is not None
        if self.push is not None and proactive and not message.request_id:
            return await self.push.send(message)  # a reminder or a job: to [http] push_url
        waiting = self._waiting.get(message.request_id) if message.request_id else None
        if waiting is None or waiting.done():
            raise DeliveryError("no HTTP request is waiting; the caller's retry reads the reply")
        waiting.set_result(message)
        return Sent()

    def health(self) -> ChannelHealth:
        return self._health

    async def _chat(self, request: web.Request) -> web.Response:
        foreign = cross_site_reason(request)
        if foreign is not None:  # a web page in the operator's browser, not an integration
            return _error(403, f"refused: {foreign}")
        refusal = self._check_token(request)
        if refusal is not None:
            return refusal
        if request.content_type != "application/json":
            # Browsers send text/plain or form types cross-site without a preflight.
            return _error(415, "Content-Type must be application/json")
        try:
            body = await self._read_body(request)
            chat = parse_chat_request(body)
            await self._check_binding(chat)
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
                "not answered now (restarting or busy): send it again with the same "
                "message_id after Retry-After",
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
        fds = descriptors()
        degraded = fds.pressure or any(h.state == "reconnecting" for h in channels.values())
        body: dict[str, Any] = {
            "status": "degraded" if degraded else "ok",
            "descriptors": fds.as_json(),
            "http_connections": {
                "open": self._cap.open if self._cap is not None else 0,
                "refused": self._cap.refused if self._cap is not None else 0,
            },
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

    async def _check_binding(self, chat: ChatRequest) -> None:
        """403 when a private chat id names a thread another user opened first.

        The sender's own chat is theirs whatever the table says (nobody can squat it: a
        thread named like it is stored apart, see channels/http/chat_ids.py); naming it
        binds it too, so nobody else can name it later. Groups need no binding: their
        ids never meet a private one.
        """
        if chat.chat_type is not ChatType.PRIVATE:
            return
        if self._chat_owner is None:
            if chat.own_chat:
                return
            raise RequestError(403, "private chat_id other than user_id needs storage")
        try:
            owner = await self._chat_owner(PLATFORM, chat.chat_id, chat.user_id)
        except Exception:
            log.exception("could not read the owner of an HTTP chat")
            raise RequestError(503, "storage is unavailable; retry later") from None
        if owner != chat.user_id and not chat.own_chat:
            raise RequestError(
                403,
                "this private chat_id belongs to another user: pick another id "
                "(or leave chat_id out for your own chat)",
            )

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
        """The body, at most max_body_bytes (the body_deadline middleware has read it in
        time and said 413 above the limit, before reading more than that)."""
        too_big = RequestError(413, f"body is larger than {self._max_body} bytes")
        if request.content_length is not None and request.content_length > self._max_body:
            raise too_big
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise too_big from None


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


def known_hosts_only(known: KnownHosts) -> Callable[..., Awaitable[web.StreamResponse]]:
    """403 for a browser's request naming a host this server is not known as (DNS
    rebinding), on every route: the API, /healthz and the console alike."""

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        foreign = foreign_host_reason(request, known)
        if foreign is not None:
            return _error(403, f"refused: {foreign}")
        return await handler(request)

    return guard
