"""Links in a message: fetched safely, reduced to their readable text, shown as notes.

Why readable text and not the HTML: a page is mostly navigation, scripts and ads; the
model needs the article, which trafilatura finds. Why only for messages addressed to the
bot: fetching every link pasted in a busy group would let anyone make the daemon visit any
address, for nothing.
Every fetch goes through core/media/fetch.py (private addresses refused on every hop).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import TTLCache

from core.media.fetch import DownloadError, SafeDownloader
from core.media.page_text import PAGE_PARSE_BYTES, extract_page, page_budget
from core.media.sandbox import ParseFailed, ParseSandbox
from core.media.shared import Defuse, clip, neutralise, one_line

log = logging.getLogger(__name__)

PAGE_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
_URL = re.compile(r"https?://[^\s<>\"'`\uff08\uff09\u3000-\u303f]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}>'\"…，。！？、；："
MB = 1024 * 1024
PAGE_TEXT_CAP = 200_000  # characters kept of one page (above [links] max_chars' ceiling)
# The page child's own limits, below the sandbox's (documents need more): room for
# trafilatura on PAGE_PARSE_BYTES of markup, with Python and lxml, on a busy machine.
PAGE_CPU_S = 5
PAGE_MEMORY_MB = 320

__all__ = ["LinkNotes", "LinkReader", "Page", "PageError", "PageReader", "extract_page"]


class PageError(Exception):
    """A page that could not be read; str(exc) is a short reason fit for the model."""


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str
    # Read only in part: (the most markup parsed, the whole body), in bytes.
    partly: tuple[int, int] | None = None


def find_links(text: str, limit: int) -> list[str]:
    """The first `limit` distinct http(s) URLs in `text`, trailing punctuation removed."""
    found: list[str] = []
    for match in _URL.finditer(text or ""):
        url = match.group(0)
        while url and url[-1] in _TRAILING:
            # keep a closing bracket that closes one opened inside the URL (wiki links)
            if url[-1] == ")" and url.count("(") >= url.count(")"):
                break
            url = url[:-1]
        if len(url) > 8 and url not in found:
            found.append(url)
        if len(found) >= limit:
            break
    return found


class PageReader:
    """Fetches and extracts one page; answers are cached for a few minutes."""

    def __init__(
        self,
        downloader: SafeDownloader,
        *,
        ttl_s: float = 600.0,
        entries: int = 128,
        clock: Callable[[], float] = time.monotonic,
        sandbox: ParseSandbox | None = None,
        parse_bytes: int = PAGE_PARSE_BYTES,
    ) -> None:
        """`sandbox`: where pages are parsed (the daemon shares one with documents);
        `parse_bytes`: the most markup of one page parsed (see page_budget)."""
        self._downloader = downloader
        self._sandbox = sandbox or ParseSandbox()
        self._parse_bytes = parse_bytes
        self._cache: TTLCache[str, Page] = TTLCache(entries, ttl_s, timer=clock)
        self.fetches = 0

    async def read(self, url: str) -> Page:
        cached = self._cache.get(url)
        if cached is not None:
            return cached
        self.fetches += 1
        try:
            got = await self._downloader.fetch(url, accept=PAGE_TYPES)
        except DownloadError as exc:
            raise PageError(str(exc)) from None
        kind = got.content_type or "text/html"
        if not kind.startswith(PAGE_TYPES):
            raise PageError(f"{kind} is not a web page")
        args = {"content_type": kind, "url": got.url, "max_chars": PAGE_TEXT_CAP}
        body, cut = page_budget(got.data, kind, self._parse_bytes)
        try:
            parsed = await self._sandbox.run(
                "page",
                args,
                body,
                max_reply=8 * PAGE_TEXT_CAP + 64 * 1024,
                cpu_s=PAGE_CPU_S,
                memory_mb=PAGE_MEMORY_MB,
            )
        except ParseFailed as exc:  # a hostile page costs a limited child, not the turn
            log.info("page %s could not be parsed: %s", _host(url), exc)
            raise PageError(f"the page could not be parsed: {exc}") from None
        title, text = str(parsed.get("title", "")), str(parsed.get("text", ""))
        partly = (self._parse_bytes, len(got.data)) if cut else None
        page = Page(url=got.url, title=title.strip(), text=text.strip(), partly=partly)
        self._cache[url] = page
        return page


@dataclass(frozen=True)
class LinkNotes:
    """What a message's links contribute: full notes for this turn, short ones to store."""

    notes: list[str]
    short: list[str]


class LinkReader:
    """Reads the links of an addressed message (and of the message it replies to)."""

    def __init__(
        self,
        pages: PageReader,
        *,
        max_links: int,
        max_chars: int,
        defuse: Defuse | None = None,
    ) -> None:
        self._pages = pages
        self._max_links = max_links
        self._max_chars = max_chars
        self._defuse = defuse

    async def notes(self, texts: list[str], start: int = 1) -> LinkNotes:
        urls: list[str] = []
        for text in texts:
            for url in find_links(text, self._max_links):
                if url not in urls and len(urls) < self._max_links:
                    urls.append(url)
        if not urls:
            return LinkNotes([], [])
        pages = await asyncio.gather(*(self._one(url) for url in urls))
        notes, short = [], []
        for number, (url, (note, brief)) in enumerate(zip(urls, pages, strict=True), start):
            notes.append(f"(Link {number}: {note})")
            short.append(f"(Link {number}: {brief})")
            log.debug("link %d read from %s", number, _host(url))
        return LinkNotes(notes, short)

    async def _one(self, url: str) -> tuple[str, str]:
        shown = one_line(url, 300)
        try:
            page = await self._pages.read(url)
        except PageError as exc:
            reason = one_line(str(exc), 160)
            note = f"{shown} could not be read: {reason}"
            return note, note
        title = one_line(page.title, 200, self._defuse) if page.title else shown
        if not page.text:
            return f"{title} — no readable text", f"{title} — {shown}"
        text, cut = clip(neutralise(page.text, self._defuse), self._max_chars)
        if cut:
            text += f" …(cut at {self._max_chars} characters)"
        if page.partly is not None:
            text += f" {partly_read(page)}"
        return f"{title} — {text}", f"{title} — {shown} (read then; ask again to re-read)"


def partly_read(page: Page) -> str:
    """What the model is told of a page read only in part."""
    parsed, size = page.partly or (0, 0)
    return f"(only the first {parsed // 1024} KiB of the page's {_size(size)} were read)"


def _size(size: int) -> str:
    return f"{size / MB:.1f} MB" if size >= MB else f"{size // 1024} KiB"


def render_page(page: Page, max_chars: int) -> str:
    """A page for the `[Read: url]` tool's observation (framed and escaped by the registry)."""
    text, cut = clip(page.text or "(no readable text)", max_chars)
    head = f"Title: {' '.join(page.title.split()) or '(untitled)'}\nURL: {page.url}\n\n"
    tail = f"\n…(cut at {max_chars} characters)" if cut else ""
    if page.partly is not None:
        tail += f"\n{partly_read(page)}"
    return head + text + tail


def _host(url: str) -> str:
    return url.split("/")[2] if url.count("/") >= 2 else "?"
