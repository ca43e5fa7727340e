"""A fetched page's bytes -> (title, readable text): the part of link reading that parses.

Its own module so the parse child (core/media/parse_worker.py) imports trafilatura and
nothing of the daemon's networking.
"""

from __future__ import annotations

import re

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
# Markup read of one page, after scripts, styles and comments are dropped. trafilatura's
# time and memory grow with the markup, and this much article markup already holds more
# text than PAGE_TEXT_CAP keeps (links.py).
PAGE_PARSE_BYTES = 512 * 1024
# Blocks that hold no readable text but often most of a page's bytes (inline bundles).
_DROPPED = ((b"<script", b"</script"), (b"<style", b"</style"), (b"<!--", b"-->"))
# Tags looked at before the rest is kept as it is: bounds the daemon's own work on a
# page made of nothing but tiny blocks.
_MAX_STEPS = 4096


def page_budget(
    body: bytes, content_type: str | None, limit: int = PAGE_PARSE_BYTES
) -> tuple[bytes, bool]:
    """The part of a page worth parsing, and whether the limit cut the page: at most
    `limit` bytes, scripts, styles and comments left out. Linear in the bytes looked at
    (finds, no regex backtracking), so the daemon can afford it on any page the
    download cap lets through."""
    if (content_type or "").startswith("text/plain") or len(body) <= limit:
        return body[:limit], len(body) > limit
    lower = body.lower()
    blocks = _Blocks(lower)
    kept: list[bytes] = []
    size, at = 0, 0
    while at < len(body) and size < limit:
        start, end_tag = blocks.next_at(at)
        piece = body[at : min(start, at + limit - size)]
        kept.append(piece)
        size += len(piece)
        at += len(piece)
        if at < start or start >= len(body):
            break  # the limit is reached, or no block is left
        close = lower.find(end_tag, start)
        if close == -1:
            at = len(body)  # an unclosed script runs to the end: nothing readable after it
            break
        at = lower.find(b">", close)
        at = len(body) if at == -1 else at + 1
    return b"".join(kept), at < len(body)


class _Blocks:
    """The next dropped block at or after a position; each kind's next place is kept,
    so a page of many blocks is still searched once through."""

    def __init__(self, lower: bytes) -> None:
        self._lower = lower
        self._next: dict[bytes, int] = {}
        self._steps = 0

    def next_at(self, at: int) -> tuple[int, bytes]:
        """Where the next block starts (len(lower) if none) and its closing tag."""
        best, closing = len(self._lower), b""
        for opening, end_tag in _DROPPED:
            found = self._find(opening, at)
            if found < best:
                best, closing = found, end_tag
        return best, closing

    def _find(self, opening: bytes, at: int) -> int:
        found = self._next.get(opening, -1)
        if found >= at:
            return found
        end = len(self._lower)
        while True:
            self._steps += 1
            found = self._lower.find(opening, at) if self._steps <= _MAX_STEPS else -1
            if found == -1:
                found = end
                break
            after = self._lower[found + len(opening) : found + len(opening) + 1]
            if opening == b"<!--" or after in _ENDS:
                break
            at = found + 1  # `<scripts>`, `<styled-box>`: another tag, kept
        self._next[opening] = found
        return found


_ENDS = (b" ", b"\t", b"\n", b"\r", b"\f", b"/", b">", b"")


def extract_page(body: bytes, content_type: str | None, url: str) -> tuple[str, str]:
    """(title, text) of a page. CPU-bound and fed hostile bytes: the daemon runs it in a
    child process with CPU and memory limits (core/media/sandbox.py)."""
    if (content_type or "").startswith("text/plain"):
        return "", body.decode("utf-8", errors="replace")
    import trafilatura  # lazy: a daemon that never reads a page never loads it

    text = trafilatura.extract(
        body, url=url, include_comments=False, include_tables=True, favor_precision=True
    )
    meta = trafilatura.extract_metadata(body, default_url=url)
    title = (meta.title if meta is not None and meta.title else "") or _raw_title(body)
    return title, text or ""


def _raw_title(body: bytes) -> str:
    match = _TITLE.search(body[:200_000])
    return match.group(1).decode("utf-8", errors="replace").strip() if match else ""
