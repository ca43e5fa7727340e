"""SSRF-safe downloads of user-supplied URLs: the one place every download goes through
(images, links people share, documents, voice files).

Why: a chat message can carry any URL. Fetching it blindly lets anyone in a group make
the daemon probe its own network (loopback admin ports, cloud metadata at 169.254.x,
the LAN). So: http(s) only, a size cap, a total time limit, and every address we are
about to connect to must be public — checked on the *resolved* address (a public-looking
name can resolve to 127.0.0.1) and again for every redirect hop, which we follow by hand.
Hosts the operator lists (e.g. NapCat on 127.0.0.1) are the only exception: "host"
exempts every port of it, "host:port" only that port.

The address checked is the address connected to: the resolver below hands aiohttp only
the addresses that passed, so a name cannot resolve to a public address for the check
and to 127.0.0.1 for the connection (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

from core.messages import TooLarge

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class DownloadError(Exception):
    """The download failed; str(exc) says why, without secrets."""


class DownloadRefused(DownloadError):
    """Refused by policy (scheme, private address, too many redirects)."""


class DownloadTooLarge(DownloadError, TooLarge):
    """The body is larger than the configured cap."""


class DownloadWrongType(DownloadError):
    """The server says the body is of a type the caller did not ask for."""


class _BlockedAddress(OSError):
    """Raised inside the resolver; OSError so aiohttp wraps it like a DNS failure."""


@dataclass(frozen=True)
class DownloadPolicy:
    """Limits for one download: bytes, seconds (all hops together), redirects, allowlist.

    `allow_private_hosts` entries are host names (matched against the URL's host) or IP
    addresses / networks (matched against the resolved address), each optionally with a
    `:port` (then only that port is exempt; IPv6 as `[::1]:8080`).
    """

    max_bytes: int
    timeout_s: float = 20.0
    max_redirects: int = 5
    allow_private_hosts: tuple[str, ...] = ()
    user_agent: str = "chatterd"
    _names: frozenset[tuple[str, int | None]] = field(init=False, repr=False, compare=False)
    _networks: tuple[tuple[IPNetwork, int | None], ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        names, networks = _split_allowlist(self.allow_private_hosts)
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_networks", networks)

    def host_allowed(self, host: str, port: int | None = None) -> bool:
        name = _norm_host(host)
        return (name, None) in self._names or (port is not None and (name, port) in self._names)

    def address_allowed(self, host: str, address: str, port: int | None = None) -> bool:
        """May we connect to `address` (resolved from `host`) on `port`?"""
        ip = _parse_ip(address)
        if ip is None:
            return False
        if is_public_address(ip) or self.host_allowed(host, port):
            return True
        return any(ip in net and only in (None, port) for net, only in self._networks)


@dataclass(frozen=True)
class Downloaded:
    data: bytes
    content_type: str | None
    url: str  # the final URL, after redirects
    # A conditional request's answers (feeds): the validators to send next time, and
    # whether the server said the body did not change (304: `data` is empty).
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False


def is_public_address(ip: IPAddress) -> bool:
    """True only for globally routable unicast addresses."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


class GuardedResolver(AbstractResolver):
    """Resolves through `inner`, then drops every address the policy forbids.

    Why a resolver: aiohttp connects to exactly the addresses its resolver returns, so
    the check and the connection use the same answer (no DNS-rebinding window).
    """

    def __init__(self, policy: DownloadPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner
        self._owns_inner = inner is None

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = ThreadedResolver()
        found = await self._inner.resolve(host, port, family)
        allowed = [r for r in found if self._policy.address_allowed(host, r["host"], port)]
        if not allowed:
            shown = ", ".join(sorted({r["host"] for r in found})) or "nothing"
            raise _BlockedAddress(f"{host} resolves to a non-public address ({shown})")
        return allowed

    async def close(self) -> None:
        if self._owns_inner and self._inner is not None:
            await self._inner.close()


class SafeDownloader:
    """Fetches one URL at a time under a DownloadPolicy. Stateless between calls."""

    def __init__(self, policy: DownloadPolicy, *, resolver: AbstractResolver | None = None):
        self.policy = policy
        self._resolver = resolver  # inner resolver (tests map names to 127.0.0.1)

    def with_cap(self, max_bytes: int) -> SafeDownloader:
        """The same rules with another size cap (files are allowed more than images)."""
        return SafeDownloader(replace(self.policy, max_bytes=max_bytes), resolver=self._resolver)

    async def fetch(
        self,
        url: str,
        *,
        accept: tuple[str, ...] = (),
        max_bytes: int | None = None,
        if_none_match: str | None = None,
        if_modified_since: str | None = None,
    ) -> Downloaded:
        """Download `url`; raise DownloadError (or a subclass) with a clear reason.

        `accept`: content-type prefixes wanted ("text/html", "image/"); another declared
        type is refused before the body is read (no declared type is let through, for
        the caller to sniff). `max_bytes` lowers the policy's cap for this call.
        `if_none_match` / `if_modified_since` make it conditional: a 304 answer comes back
        as `not_modified` with no body.
        """
        cap = min(self.policy.max_bytes, max_bytes or self.policy.max_bytes)
        conditions = {
            name: value
            for name, value in (
                ("If-None-Match", if_none_match),
                ("If-Modified-Since", if_modified_since),
            )
            if value
        }
        try:
            async with asyncio.timeout(self.policy.timeout_s):
                return await self._fetch(url, accept, cap, conditions)
        except TimeoutError:
            raise DownloadError(f"timed out after {self.policy.timeout_s:g}s") from None

    async def _fetch(
        self, url: str, accept: tuple[str, ...], cap: int, conditions: dict[str, str]
    ) -> Downloaded:
        resolver = GuardedResolver(self.policy, self._resolver)
        connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, limit=4)
        headers = {"User-Agent": self.policy.user_agent}
        async with aiohttp.ClientSession(
            connector=connector, trust_env=False, headers=headers, cookie_jar=_no_cookies()
        ) as session:
            current = self._check_url(url)
            for _hop in range(self.policy.max_redirects + 1):
                async with _GuardedRequest(session, current, conditions) as response:
                    if response.status in _REDIRECTS:
                        current = self._next_hop(current, response)
                        continue
                    if response.status == 304 and conditions:
                        return Downloaded(b"", None, str(current), not_modified=True)
                    if response.status != 200:
                        raise DownloadError(f"HTTP {response.status} from {_safe(current)}")
                    declared = _declared_type(response)
                    if accept and declared and not declared.startswith(accept):
                        raise DownloadWrongType(f"{declared} is not a wanted type")
                    data = await self._read_capped(response, cap)
                    return Downloaded(
                        data,
                        declared or None,
                        str(current),
                        etag=response.headers.get("ETag"),
                        last_modified=response.headers.get("Last-Modified"),
                    )
            raise DownloadRefused(f"more than {self.policy.max_redirects} redirects")

    def _check_url(self, raw: str | URL) -> URL:
        try:
            url = raw if isinstance(raw, URL) else URL(raw)
        except (ValueError, TypeError):
            raise DownloadRefused("not a valid URL") from None
        if url.scheme not in ("http", "https"):
            raise DownloadRefused(f"scheme {url.scheme or '(none)'!r} is not http(s)")
        if not url.host:
            raise DownloadRefused("URL has no host")
        if url.user or url.password:
            raise DownloadRefused("URL carries credentials")
        ip = _parse_ip(url.host)
        if ip is not None and not self.policy.address_allowed(url.host, str(ip), url.port):
            raise DownloadRefused(f"{url.host} is not a public address")
        return url

    def _next_hop(self, current: URL, response: aiohttp.ClientResponse) -> URL:
        location = response.headers.get("Location")
        if not location:
            raise DownloadError(f"redirect without Location from {_safe(current)}")
        try:
            target = current.join(URL(location))
        except ValueError:
            raise DownloadRefused("redirect to an invalid URL") from None
        return self._check_url(target)

    async def _read_capped(self, response: aiohttp.ClientResponse, cap: int) -> bytes:
        """Stops reading as soon as the cap is passed: never the whole body, then a cut."""
        if response.content_length is not None and response.content_length > cap:
            raise DownloadTooLarge(f"{response.content_length} bytes is over the {cap} cap")
        buf = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK):
            buf += chunk
            if len(buf) > cap:
                raise DownloadTooLarge(f"more than the {cap} byte cap")
        return bytes(buf)


class _GuardedRequest:
    """`session.get` without automatic redirects, translating refusals into our errors."""

    def __init__(
        self, session: aiohttp.ClientSession, url: URL, headers: dict[str, str] | None = None
    ) -> None:
        self._session = session
        self._url = url
        self._headers = headers or {}
        self._cm: Any = None

    async def __aenter__(self) -> aiohttp.ClientResponse:
        self._cm = self._session.get(self._url, allow_redirects=False, headers=self._headers)
        try:
            return await self._cm.__aenter__()
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, _BlockedAddress):
                raise DownloadRefused(str(exc.os_error)) from None
            raise DownloadError(f"cannot connect to {self._url.host}: {exc.os_error}") from None
        except aiohttp.InvalidURL as exc:
            raise DownloadRefused(f"invalid URL: {exc}") from None
        except aiohttp.ClientError as exc:
            raise DownloadError(f"request to {self._url.host} failed: {exc}") from None

    async def __aexit__(self, *exc: object) -> None:
        await self._cm.__aexit__(*exc)


def _declared_type(response: aiohttp.ClientResponse) -> str:
    """The declared type without parameters; the header may be missing or odd."""
    raw = response.headers.get("Content-Type", "")
    return raw.split(";", 1)[0].strip().lower()


def _no_cookies() -> aiohttp.DummyCookieJar:
    return aiohttp.DummyCookieJar()


def _safe(url: URL) -> str:
    """Scheme, host and path only: query strings may carry tokens."""
    return str(url.with_query(None).with_fragment(None))


def _norm_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    ip = _parse_ip(host)
    return str(ip) if ip is not None else host


def _parse_ip(value: str) -> IPAddress | None:
    value = value.strip("[]")
    if "%" in value:  # IPv6 zone id
        value = value.split("%", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def split_host_port(entry: str) -> tuple[str, int | None]:
    """ "host", "host:port", "[v6]:port", "v6" or "net/len" -> (host, port or None)."""
    entry = entry.strip()
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return host, int(port) if port.isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        if port.isdigit():
            return host, int(port)
    return entry, None


def _split_allowlist(
    entries: Iterable[str],
) -> tuple[frozenset[tuple[str, int | None]], tuple[tuple[IPNetwork, int | None], ...]]:
    names: set[tuple[str, int | None]] = set()
    networks: list[tuple[IPNetwork, int | None]] = []
    for entry in entries:
        host, port = split_host_port(entry)
        if not host:
            continue
        try:
            networks.append((ipaddress.ip_network(host, strict=False), port))
        except ValueError:
            pass
        names.add((_norm_host(host), port))
    return frozenset(names), tuple(networks)
