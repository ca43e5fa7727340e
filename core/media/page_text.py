"""A fetched page's bytes -> (title, readable text): the part of link reading that parses.

Its own module so the parse child (core/media/parse_worker.py) imports trafilatura and
nothing of the daemon's networking.
"""

from __future__ import annotations

import re

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


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
