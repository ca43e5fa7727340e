"""A file's bytes -> the pages the knowledge base indexes (.md .txt .pdf .docx).

Why pages and not the text `[documents]` reads: a PDF keeps its page numbers (`p. 12`) so
an answer can be checked, and Markdown is cut at its headings. Why in the parse sandbox
(core/media/sandbox.py), with the same jobs as `/kb add` ("pdf_pages", "document"): a
file uploaded in the console or dropped in the knowledge folder is still bytes pypdf and
the DOCX reader must survive, within the same CPU, memory and time limits.
"""

from __future__ import annotations

from typing import Any, Protocol

from core.knowledge.chunking import text_pages
from core.media.documents import Page
from core.media.sandbox import ParseFailed, ParseSandbox
from core.media.shared import one_line

SUFFIXES = (".md", ".markdown", ".txt", ".pdf", ".docx")
MAX_PAGES = 2000  # a PDF's pages read at most; its text is bounded by max_bytes anyway
PARSE_TIMEOUT_S = 180.0


class ReadFailed(ValueError):
    """The file cannot be indexed; str(exc) is a short reason fit for a chat line."""


class PageReader(Protocol):
    async def pages(self, data: bytes, name: str) -> list[Page]: ...


def readable(name: str) -> bool:
    """A file the knowledge base indexes, by its name."""
    return name.lower().endswith(SUFFIXES) and not name.startswith(".")


class SandboxReader:
    """Reads pages in the parse sandbox's child processes."""

    def __init__(
        self, sandbox: ParseSandbox, max_chars: int, max_file_bytes: int = 10 * 1024 * 1024
    ) -> None:
        self._sandbox = sandbox
        self._max_chars = max_chars  # one more than [knowledge] max_bytes: the engine refuses
        self._max_file = max_file_bytes  # [documents] max_bytes

    async def pages(self, data: bytes, name: str) -> list[Page]:
        if not readable(name):
            raise ReadFailed("only .md, .txt, .pdf and .docx files are indexed")
        if len(data) > self._max_file:
            limit = f"{self._max_file} bytes ([documents] max_bytes)"
            raise ReadFailed(f"the file is larger than {limit}")
        reply = reply_bound(self._max_chars)
        try:
            if name.lower().endswith(".pdf"):
                pages = await pdf_pages(self._sandbox, data, reply)
                if pages is None:
                    raise ReadFailed("the reader failed on it")
                return pages
            # A .md or .txt name is read as text whatever its bytes claim to be.
            as_text = name if name.lower().endswith(".docx") else name + ".txt"
            args = {"name": as_text, "mime": None, "max_pages": 1, "max_chars": self._max_chars}
            text = await document_text(self._sandbox, data, args, reply)
        except ParseFailed as exc:
            raise ReadFailed(one_line(str(exc), 160)) from None
        if text is None:
            raise ReadFailed("the reader failed on it")
        return text_pages(text, name)


def reply_bound(max_chars: int) -> int:
    """The bytes a reader's reply may take for `max_chars` of text: UTF-8 and JSON escapes."""
    return 8 * max_chars + 64 * 1024


async def pdf_pages(sandbox: ParseSandbox, data: bytes, max_reply: int) -> list[Page] | None:
    """A PDF's pages with their page locators, or None where the reply holds no page list.

    One spelling for the console/folder reader and `/kb add`; ParseFailed passes through.
    """
    found = await sandbox.run(
        "pdf_pages", {"max_pages": MAX_PAGES}, data, max_reply=max_reply, timeout_s=PARSE_TIMEOUT_S
    )
    raw = found.get("pages")
    if not isinstance(raw, list):
        return None
    return [
        Page(str(p.get("text", "")), str(p.get("locator", ""))) for p in raw if isinstance(p, dict)
    ]


async def document_text(
    sandbox: ParseSandbox, data: bytes, args: dict[str, Any], max_reply: int
) -> str | None:
    """A document's text through the sandbox's "document" job, or None on an odd reply."""
    doc = await sandbox.run("document", args, data, max_reply=max_reply, timeout_s=PARSE_TIMEOUT_S)
    text = doc.get("text")
    return text if isinstance(text, str) else None
