"""A DOCX's text, read as a stream and only as far as the text budget.

Why a stream: python-docx builds the whole document tree, so an honest 1 MB DOCX holding
50 MB of XML cost its reader about 300 MB before a word reached the model, which reads a
few thousand tokens of it. Here word/document.xml is inflated in small counted steps and
fed to lxml's pull parser; each paragraph is taken and dropped as it ends, and reading
stops once the text passes `max_chars`. The rest of the archive is never inflated.
The ZIP's headers are only a claim (checked because it is cheap); the count of inflated
bytes is the guard. Entities are never expanded and nothing is fetched.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_UNZIPPED = 64 * 1024 * 1024  # claimed by all entries together, or inflated of one
MAX_ZIP_ENTRIES = 2000
MAX_ZIP_RATIO = 200  # one entry may claim at most this many times its packed size
ZIP_STEP = 256 * 1024  # inflated per read: the most one step of a ZIP entry allocates
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MAIN = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"


class DocxRefused(ValueError):
    """The file cannot be read as a DOCX; str(exc) is a short reason."""


@dataclass(frozen=True)
class DocxText:
    text: str
    cut: bool  # reading stopped at max_chars; the rest was never inflated


def docx_text(data: bytes, max_chars: int) -> DocxText:
    """Body paragraphs and table rows (cells joined by " | ") in document order."""
    from lxml import etree  # lazy: lxml comes with python-docx

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            main = _main_part(archive)
            parser = etree.XMLPullParser(
                events=("end",),
                tag=(W + "p", W + "tr", W + "tbl"),
                resolve_entities=False,
                no_network=True,
                load_dtd=False,
                huge_tree=False,
            )
            lines: list[str] = []
            used = 0
            for chunk in _inflate(archive, main):
                parser.feed(chunk)
                for _, element in parser.read_events():
                    line = _line(element)
                    if line is not None and line.strip():
                        lines.append(line)
                        used += len(line) + 1
                    if used > max_chars:
                        return DocxText("\n".join(lines)[:max_chars], True)
            parser.close()
    except DocxRefused:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise DocxRefused("it is not a readable DOCX") from None
    except (etree.LxmlError, NotImplementedError, KeyError):
        raise DocxRefused("it is not a readable DOCX") from None
    return DocxText("\n".join(lines), False)


def _line(element: Any) -> str | None:
    """A body paragraph's or a table row's text, or None; then the element is dropped
    (with the siblings already read) so the tree holds little more than the current
    paragraph or row. A cell's paragraph is kept: its row says it."""
    parent = element.getparent()
    if element.tag == W + "p":
        if parent is None or parent.tag != W + "body":
            return None
        line: str | None = _text(element)
    elif element.tag == W + "tr":
        cells = element.iterchildren(W + "tc")
        line = " | ".join("\n".join(_text(p) for p in c.iter(W + "p")).strip() for c in cells)
    else:
        line = None  # a table ended: its rows were said
    if parent is not None:
        element.clear()
        while element.getprevious() is not None:
            del parent[0]
    return line


def _text(paragraph: Any) -> str:
    parts: list[str] = []
    for node in paragraph.iter(W + "t", W + "tab", W + "br", W + "cr"):
        if node.tag == W + "t":
            parts.append(node.text or "")
        else:
            parts.append("\t" if node.tag == W + "tab" else "\n")
    return "".join(parts)


def _main_part(archive: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The document's main part, named by the package's relationships; the sizes of all
    entries checked first."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise DocxRefused("it has too many parts")
    claimed = 0
    for info in infos:
        claimed += info.file_size
        if info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1024):
            raise DocxRefused("it unpacks to far more than its size (a ZIP bomb?)")
    if claimed > MAX_UNZIPPED:
        raise DocxRefused("it unpacks to more than the allowed size")
    names = {info.filename: info for info in infos}
    target = "word/document.xml"
    rels = names.get("_rels/.rels")
    if rels is not None:
        from lxml import etree

        raw = b"".join(_inflate(archive, rels, 1024 * 1024))
        safe = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
        for rel in etree.fromstring(raw, safe).iter(_RELS):
            if rel.get("Type") == _MAIN:
                target = str(rel.get("Target", target)).lstrip("/")
    if target not in names:
        raise DocxRefused("it is not a readable DOCX")
    return names[target]


def _inflate(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, room: int = MAX_UNZIPPED
) -> Iterator[bytes]:
    """One entry in ZIP_STEP steps, at most `room` bytes: what really came out is counted,
    whatever the headers claim (zipfile checks the CRC of an entry read to its end)."""
    seen = 0
    with archive.open(info) as entry:
        while chunk := entry.read(ZIP_STEP):
            seen += len(chunk)
            if seen > room:
                raise DocxRefused("it unpacks to more than the allowed size")
            yield chunk
