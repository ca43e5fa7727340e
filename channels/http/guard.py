"""Is this HTTP request another site's doing? One answer for the API and the console.

Why: a page on any site can make the operator's browser send a "simple" request (a
form POST, or fetch() with `Content-Type: text/plain`) to 127.0.0.1 without a CORS
preflight; the response is hidden from that page, but the request still runs. Browsers
name the page's origin in `Origin` on every POST (and on cross-origin fetches), and
modern ones say `Sec-Fetch-Site`. Clients that are not browsers (curl, an integration)
send neither, so checking them costs an integration nothing.

A page can also be "same origin" with this server by DNS rebinding: its own name, later
pointed at 127.0.0.1, so `Origin` and `Host` agree. `KnownHosts` catches that: a browser's
request must name this server as it is bound (or as `[http] public_url` says).

Lives in `channels` because both the HTTP channel and the console (`bot/console`, which
may import channels but not the other way round) use it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

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


def from_browser(request: web.Request) -> bool:
    """Browsers name the page's origin (`Origin`) on every POST and say `Sec-Fetch-*` on
    every request; integrations (curl, a bot framework) send neither."""
    headers = request.headers
    return "Origin" in headers or "Sec-Fetch-Site" in headers or "Sec-Fetch-Mode" in headers


@dataclass(frozen=True)
class KnownHosts:
    """The names a browser may use for this server in its `Host` header.

    Why: a DNS-rebinding page (attacker.example, its name later pointed at 127.0.0.1)
    is "same origin" with this server as far as the browser knows: `Origin` and `Host`
    both say attacker.example. Only the name itself gives it away, so a browser's request
    must name this server as it is bound (or as `[http] public_url` says).
    """

    names: frozenset[str]
    any_address: bool = False  # bound to every interface: any IP literal is this server

    @classmethod
    def of(cls, bind_host: str, public_url: str | None = None) -> KnownHosts:
        host = bind_host.strip().strip("[]").lower()
        names = {host, "localhost"}
        wildcard = host in ("", "0.0.0.0", "::")
        if wildcard or _is_loopback(host):
            names |= {"127.0.0.1", "::1", "localhost"}
        if public_url:
            public = urlsplit(public_url).hostname
            if public:
                names.add(public.lower())
        return cls(frozenset(n for n in names if n), any_address=wildcard)

    def accepts(self, host_header: str) -> bool:
        name = _host_name(host_header)
        if name in self.names:
            return True
        return self.any_address and _is_address(name)


def foreign_host_reason(request: web.Request, known: KnownHosts) -> str | None:
    """Why a browser's request names a host this server is not known as, or None."""
    if not from_browser(request) or known.accepts(request.host):
        return None
    return "this request named a host this server is not known as (DNS rebinding?)"


def _host_name(host_header: str) -> str:
    """`Host` without its port, lower case, IPv6 brackets and a trailing dot removed."""
    text = host_header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    if text.count(":") == 1:
        text = text.split(":", 1)[0]
    return text.rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
