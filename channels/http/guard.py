"""Is this HTTP request another site's doing? One answer for the API and the console.

Why: a page on any site can make the operator's browser send a "simple" request (a
form POST, or fetch() with `Content-Type: text/plain`) to 127.0.0.1 without a CORS
preflight; the response is hidden from that page, but the request still runs. Browsers
name the page's origin in `Origin` on every POST (and on cross-origin fetches), and
modern ones say `Sec-Fetch-Site`. Clients that are not browsers (curl, an integration)
send neither, so checking them costs an integration nothing.

Lives in `channels` because both the HTTP channel and the console (`bot/console`, which
may import channels but not the other way round) use it.
"""

from __future__ import annotations

from aiohttp import web

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FOREIGN_SITES = frozenset({"cross-site", "same-site"})


def cross_site_reason(request: web.Request) -> str | None:
    """Why `request` looks like another site's page made it, or None when it does not.

    A foreign `Origin` (including the opaque "null" of sandboxed frames and file:// pages)
    is refused on any method; `Sec-Fetch-Site: cross-site|same-site` on a method that
    changes something. A page of this very server (same scheme, host and port) passes.
    """
    origin = request.headers.get("Origin")
    if origin is not None and origin != own_origin(request):
        return "this request came from another site"
    site = request.headers.get("Sec-Fetch-Site")
    if request.method not in SAFE_METHODS and site in FOREIGN_SITES:
        return "this request came from another site"
    return None


def own_origin(request: web.Request) -> str:
    """The origin a page served by this server would send (scheme://host[:port])."""
    return f"{request.scheme}://{request.host}"
