"""A feed's body as a title and entries: RSS 2.0 and Atom through feedparser, JSON Feed
as plain JSON (https://jsonfeed.org/version/1.1).

Each entry gets a stable key, a hash of its id (else its link, else its title), so an
entry is recognised on every later read however the feed reorders or retitles it.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from typing import Any

MAX_ENTRIES = 200  # read at most this many entries of one body


class NotAFeed(ValueError):
    """The body is neither RSS, Atom nor JSON Feed; str() says so in one line."""


@dataclass(frozen=True)
class ParsedEntry:
    key: str
    title: str
    link: str


@dataclass(frozen=True)
class ParsedFeed:
    title: str
    entries: list[ParsedEntry]


def entry_key(ident: str) -> str:
    return hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()


def _entry(ident: Any, title: Any, link: Any) -> ParsedEntry | None:
    title = " ".join(str(title or "").split())
    link = str(link or "").strip()
    ident = str(ident or "").strip() or link or title
    if not ident:
        return None
    return ParsedEntry(entry_key(ident), title or link or "(untitled)", link)


def _json_feed(body: bytes) -> ParsedFeed:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise NotAFeed("the body is not valid JSON") from None
    if not isinstance(data, dict) or not str(data.get("version", "")).startswith(
        "https://jsonfeed.org/version/"
    ):
        raise NotAFeed("the JSON is not a JSON Feed (no jsonfeed.org version)")
    items = data.get("items")
    if not isinstance(items, list):
        raise NotAFeed("the JSON Feed has no items list")
    entries = []
    for item in items[:MAX_ENTRIES]:
        if isinstance(item, dict):
            link = item.get("url") or item.get("external_url")
            found = _entry(item.get("id"), item.get("title"), link)
            if found is not None:
                entries.append(found)
    return ParsedFeed(" ".join(str(data.get("title") or "").split()), entries)


def _xml_feed(body: bytes) -> ParsedFeed:
    import feedparser  # loaded only when a feed is read

    # A stream, never a string: feedparser fetches a string that looks like a URL itself,
    # and every download must go through core/media/fetch.py.
    parsed = feedparser.parse(io.BytesIO(body), sanitize_html=False, resolve_relative_uris=False)
    version = getattr(parsed, "version", "")
    if not version:
        raise NotAFeed("the body is neither RSS, Atom nor JSON Feed")
    entries = []
    for item in parsed.entries[:MAX_ENTRIES]:
        found = _entry(item.get("id"), item.get("title"), item.get("link"))
        if found is not None:
            entries.append(found)
    title = " ".join(str(parsed.feed.get("title") or "").split())
    return ParsedFeed(title, entries)


def parse_feed(body: bytes, content_type: str | None = None) -> ParsedFeed:
    """The feed in `body`; NotAFeed when it is none of the three. Entries newest first
    as the feed lists them."""
    start = body.lstrip()[:1]
    if start in (b"{", b"[") or (content_type or "").endswith("json"):
        return _json_feed(body)
    return _xml_feed(body)
