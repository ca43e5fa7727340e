"""The HTTP server's defences against slow and numerous clients, and its descriptor gauge.

Why: every open connection is a file descriptor, and the daemon's model calls, database
connections and downloads need descriptors too. Left alone, aiohttp keeps a connection
that trickles its headers a byte at a time for its whole keep-alive time, and accepts
connections until the process runs out of descriptors (then every model call fails while
/healthz still says ok). So:

- a request's headers must be complete within `header_timeout_s` of the connection
  opening or of the previous answer (aiohttp's keep-alive timer closes a connection that
  is still waiting for a complete request then; it doubles as the idle keep-alive time);
- a request's body must be read within `body_timeout_s` (`body_deadline` middleware:
  408 and the connection closed);
- beyond `max_connections` open connections a new one is answered `503` with
  `Retry-After` and closed at once (`ConnectionCap`), before aiohttp parses anything;
- `descriptors()` reports open descriptors against RLIMIT_NOFILE for /healthz.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

log = logging.getLogger(__name__)

# Descriptors kept free for everything that is not an HTTP client (model calls, the
# database, downloads, logs): max_connections is lowered to fit under the limit.
RESERVED_DESCRIPTORS = 256
PRESSURE_RATIO = 0.9  # /healthz says "degraded" from this share of the descriptor limit
_BUSY_BODY = b'{"error": "too many connections; retry later"}'
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: application/json\r\n"
    b"Retry-After: 1\r\n"
    b"Connection: close\r\n" + f"Content-Length: {len(_BUSY_BODY)}\r\n\r\n".encode() + _BUSY_BODY
)


@dataclass(frozen=True)
class Descriptors:
    """Open file descriptors of this process against its soft RLIMIT_NOFILE."""

    open: int | None  # None where the platform cannot count them (no /proc, /dev/fd)
    limit: int | None  # None: unlimited

    @property
    def pressure(self) -> bool:
        if self.open is None or self.limit is None:
            return False
        return self.open >= self.limit * PRESSURE_RATIO

    def as_json(self) -> dict[str, Any]:
        return {"open": self.open, "limit": self.limit, "pressure": self.pressure}


def descriptors() -> Descriptors:
    """Count this process's open descriptors (Linux /proc, else /dev/fd)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = None if soft == resource.RLIM_INFINITY else int(soft)
    for directory in ("/proc/self/fd", "/dev/fd"):
        try:
            # listdir itself holds one descriptor for the directory while it reads.
            return Descriptors(open=max(0, len(os.listdir(directory)) - 1), limit=limit)
        except OSError:
            continue
    return Descriptors(open=None, limit=limit)


def fitting_connections(wanted: int) -> int:
    """`wanted`, lowered (with a warning) so clients leave RESERVED_DESCRIPTORS free."""
    limit = descriptors().limit
    if limit is None or wanted + RESERVED_DESCRIPTORS <= limit:
        return wanted
    fitted = max(1, limit - RESERVED_DESCRIPTORS)
    log.warning(
        "[http] max_connections %d does not fit the descriptor limit %d (RLIMIT_NOFILE) with "
        "%d kept for the rest of the daemon; using %d (raise `ulimit -n` to allow more)",
        wanted,
        limit,
        RESERVED_DESCRIPTORS,
        fitted,
    )
    return fitted


class _Busy(asyncio.Protocol):
    """What a connection over the cap talks to: one 503, then closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(BUSY_RESPONSE)
        transport.close()


class ConnectionCap:
    """The protocol factory for `loop.create_server`: aiohttp's own handler while fewer
    than `limit` connections are open, else `_Busy`."""

    def __init__(self, server: web.Server, limit: int) -> None:
        self._server = server
        self._limit = limit
        self.refused = 0

    def __call__(self) -> asyncio.BaseProtocol:
        if len(self._server.connections) >= self._limit:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                log.warning(
                    "HTTP: %d connections open (the limit); refused %d so far",
                    self._limit,
                    self.refused,
                )
            return _Busy()
        return self._server()

    @property
    def open(self) -> int:
        return len(self._server.connections)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# Paths that take a larger body than the server's `client_max_size` (the console's
# upload of a document): a route registrar adds `app[LARGER_BODIES][path] = bytes`.
LARGER_BODIES = web.AppKey("larger_bodies", dict[str, int])


def body_deadline(timeout_s: float, json_paths: frozenset[str] = frozenset()) -> Middleware:
    """Middleware: read any request body within `timeout_s` (it is cached, so handlers'
    own `read()`/`post()` return it at once; a multipart form is parsed here, as its
    stream can be read only once); too slow: 408 and the connection closed.
    The body may be as large as the server allows, or what LARGER_BODIES says its path
    takes. On `json_paths` a body is never parsed as a form, whatever its label: it is
    read as bytes, and the handler answers a wrong Content-Type with 415."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        larger = request.config_dict.get(LARGER_BODIES, {}).get(request.path)
        if larger:
            request = request.clone(client_max_size=larger)
        if request.can_read_body:
            too_big = web.json_response(
                {"error": f"body is larger than {request.client_max_size} bytes"}, status=413
            )
            if (request.content_length or 0) > request.client_max_size:
                return too_big
            try:
                async with asyncio.timeout(timeout_s):
                    form = request.content_type == "multipart/form-data"
                    if form and request.path not in json_paths:
                        await request.post()  # its stream is read once: parsed (and kept) now
                    else:
                        await request.read()
            except web.HTTPRequestEntityTooLarge:
                return too_big
            except ValueError:  # a multipart body that does not parse
                return web.json_response({"error": "malformed multipart body"}, status=400)
            except TimeoutError:
                response = web.json_response(
                    {"error": f"request body not received within {timeout_s:g} s"}, status=408
                )
                response.force_close()
                return response
        return await handler(request)

    return middleware
