"""What `/kb add` reads: a shared file or a web page, through the same guarded readers as
`[documents]` and `[links]` (the parse sandbox, the safe fetcher).

Why not the turn's document notes: those are cut to a share of the context window for one
turn; a knowledge base keeps the whole text (up to `[knowledge] max_bytes`), and a PDF
keeps its page numbers so an answer can cite `handbook.pdf · p. 12`.
"""

from __future__ import annotations

from typing import Any

from core.knowledge.reading import MAX_PAGES, document_text, pdf_pages, reply_bound
from core.media.documents import Page, kind_of
from core.media.links import PageError, PageReader
from core.media.sandbox import ParseFailed, ParseSandbox
from core.media.shared import one_line
from core.messages import Attachment


class Unreadable(Exception):
    """The file or page could not be read; str(exc) is one line for the chat."""


class KnowledgeSources:
    """Reads documents and pages for the knowledge base, within its limits."""

    def __init__(
        self,
        sandbox: ParseSandbox,
        pages: PageReader | None,
        *,
        max_file_bytes: int,
        max_text_bytes: int,
    ) -> None:
        self._sandbox = sandbox
        self._pages = pages
        self._max_file = max_file_bytes
        self._max_text = max_text_bytes

    async def attachment(self, attachment: Attachment) -> tuple[str, str | tuple[Page, ...]]:
        """(source name, text or PDF pages) of a shared document."""
        name = one_line(attachment.name or "document", 120)
        if attachment.kind != "document":
            raise Unreadable(f"{name} is not a document (PDF, DOCX or text)")
        limit = f"{self._max_file} bytes ([documents] max_bytes)"
        too_large = Unreadable(f"{name} is larger than {limit}")
        if attachment.size is not None and attachment.size > self._max_file:
            raise too_large
        try:
            data = await attachment.fetch()
        except Exception as exc:  # the channel's download: too large, gone, timed out
            raise Unreadable(f"{name} could not be downloaded ({type(exc).__name__})") from None
        if len(data) > self._max_file:
            raise too_large
        return name, await self._parse(data, name, attachment.mime)

    async def _parse(self, data: bytes, name: str, mime: str | None) -> str | tuple[Page, ...]:
        reply = reply_bound(self._max_text)
        try:
            if kind_of(data, name, mime) == "pdf":
                pages = await pdf_pages(self._sandbox, data, reply)
                if pages is None:
                    raise Unreadable(f"{name} could not be read")
                return tuple(pages)
            # One character more than fits: a longer text is refused by the engine's
            # max_bytes check, with the line that names the key.
            args: dict[str, Any] = {"name": name, "mime": mime, "max_pages": MAX_PAGES}
            args["max_chars"] = self._max_text + 1
            text = await document_text(self._sandbox, data, args, reply)
        except ParseFailed as exc:
            raise Unreadable(f"{name} could not be read: {one_line(str(exc), 160)}") from None
        if text is None:
            raise Unreadable(f"{name} could not be read")
        return text

    async def page(self, url: str) -> tuple[str, str]:
        """(the page's address, its title and text) through the safe fetcher."""
        if self._pages is None:
            raise Unreadable("reading links is off ([links] enabled = false)")
        try:
            page = await self._pages.read(url)
        except PageError as exc:
            raise Unreadable(f"the page could not be read: {one_line(str(exc), 160)}") from None
        text = f"# {page.title}\n\n{page.text}" if page.title else page.text
        return page.url, text
