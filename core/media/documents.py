"""Documents people send (PDF, DOCX, plain text, Markdown, CSV, JSON) -> their text.

Why limits everywhere: a file is chosen by whoever sends it. A DOCX is a ZIP that can
expand a few kilobytes into gigabytes, a PDF can claim ten thousand pages or be broken
on purpose, a text file can be 100 MB of one line. Bytes, pages, characters and the
unpacked size are all capped, and a file that cannot be read becomes a short reason,
never a traceback. The kind is decided by the bytes (magic numbers), not the name.
`pdf_pages` keeps a PDF's pages apart, each with its number, for citations (`p. 12`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

TEXT_NAMES = (".txt", ".md", ".markdown", ".csv", ".tsv", ".json", ".log", ".text")
TEXT_TYPES = ("text/", "application/json", "application/csv")
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


class BadDocument(ValueError):
    """The file cannot be read; str(exc) is a short reason fit for the user and model."""


@dataclass(frozen=True)
class DocumentText:
    kind: str  # "pdf", "docx", "text"
    text: str
    pages: int | None = None  # a PDF's page count
    pages_read: int | None = None
    cut: bool = False  # the text was cut at the character or page limit


@dataclass(frozen=True)
class Page:
    """Text with one locator: "p. 12", '"Bans"', or "" for a document with no parts."""

    text: str
    locator: str = ""


def kind_of(data: bytes, name: str, mime: str | None) -> str | None:
    """ "pdf", "docx", "text", or None for a file we do not read."""
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return "docx" if name.lower().endswith(".docx") or mime == DOCX_TYPE else None
    lowered = name.lower()
    if lowered.endswith(TEXT_NAMES) or (mime or "").startswith(TEXT_TYPES):
        return "text" if b"\x00" not in data[:8192] else None
    return None


def extract_document(
    data: bytes, name: str, mime: str | None, *, max_pages: int, max_chars: int
) -> DocumentText:
    """The text of one document within the limits. CPU-bound and fed hostile bytes: the
    daemon runs it in a child process with CPU and memory limits (core/media/sandbox.py)."""
    kind = kind_of(data, name, mime)
    if kind is None:
        raise BadDocument("not a PDF, DOCX or text file")
    if kind == "pdf":
        return _pdf(data, max_pages, max_chars)
    if kind == "docx":
        return _docx(data, max_chars)
    return _text(data, name, max_chars)


def _cap(parts: list[str], max_chars: int) -> tuple[str, bool]:
    text = "\n".join(p for p in parts if p.strip())
    if len(text) > max_chars:
        return text[:max_chars], True
    return text, False


def _pdf(data: bytes, max_pages: int, max_chars: int) -> DocumentText:
    from pypdf import PdfReader  # lazy: loaded on the first PDF
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise BadDocument("it is protected by a password")
        total = len(reader.pages)
        parts: list[str] = []
        used = read = 0
        for page in reader.pages[:max_pages]:
            text = page.extract_text() or ""
            parts.append(text)
            used += len(text)
            read += 1
            if used > max_chars:
                break
    except BadDocument:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError):
        raise BadDocument("it is not a readable PDF") from None
    except RecursionError:
        raise BadDocument("it is not a readable PDF (too deeply nested)") from None
    except MemoryError:
        raise BadDocument("it needs more memory to read than allowed") from None
    text, cut = _cap(parts, max_chars)
    if not text.strip():
        raise BadDocument("it has no text layer (a scan?)")
    return DocumentText("pdf", text, total, read, cut or read < total)


def pdf_pages(data: bytes, max_pages: int) -> list[Page]:
    """A PDF's pages with their numbers (`p. N`). CPU-bound: run it in a worker thread.

    Raises BadDocument (a ValueError) with a short reason when the file cannot be read.
    """
    from pypdf import PdfReader  # lazy: only a PDF needs it
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise BadDocument("the PDF is protected by a password")
        pages = [
            Page(page.extract_text() or "", f"p. {number}")
            for number, page in enumerate(reader.pages[:max_pages], start=1)
        ]
    except (PyPdfError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise BadDocument("it is not a readable PDF") from exc
    except RecursionError as exc:
        raise BadDocument("it is not a readable PDF (too deeply nested)") from exc
    return [p for p in pages if p.text.strip()]


def _docx(data: bytes, max_chars: int) -> DocumentText:
    from core.media.docx_text import DocxRefused, docx_text

    try:
        read = docx_text(data, max_chars)
    except DocxRefused as exc:
        raise BadDocument(str(exc)) from None
    except MemoryError:
        raise BadDocument("it needs more memory to read than allowed") from None
    if not read.text.strip():
        raise BadDocument("it has no text")
    return DocumentText("docx", read.text, cut=read.cut)


def _text(data: bytes, name: str, max_chars: int) -> DocumentText:
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        text = data.decode("utf-8", errors="replace")
    if name.lower().endswith(".json"):
        try:  # pretty-printed JSON reads better than one 100 kB line
            text = json.dumps(json.loads(text), ensure_ascii=False, indent=1)
        except (ValueError, RecursionError):
            pass
    text, cut = _cap([text], max_chars)
    if not text.strip():
        raise BadDocument("it is empty")
    return DocumentText("text", text, cut=cut)
