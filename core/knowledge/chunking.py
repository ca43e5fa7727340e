"""Documents -> pages -> passages of about `chunk_tokens`, each with where it came from.

Why locators: an answer that cites `[1] handbook.pdf · p. 12` or `[2] rules.md · "Bans"`
can be checked by the person who asked. So a document is first a list of pages (a PDF's
pages, a Markdown file's sections under their nearest heading, or one page of plain
text), and a passage never spans two pages: its locator is its page's.
Why overlap: a fact cut in half at a passage boundary is still whole in one of the two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass

from core.knowledge.segment import estimate_tokens
from core.media.documents import Page

_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
# Sentence ends in Chinese and English, and line breaks: where a passage may be cut.
_SENTENCE = re.compile(r"(?<=[。！？；!?;])|(?<=[.:](?=\s))|\n+")
MAX_LOCATOR_CHARS = 80


@dataclass(frozen=True)
class Passage(Page):
    """A piece of one page (its locator is the page's), numbered in its document."""

    _: KW_ONLY
    ordinal: int


def text_pages(text: str, name: str) -> list[Page]:
    """A Markdown file's sections under their nearest heading; other text is one page."""
    if not name.lower().endswith((".md", ".markdown")):
        return [Page(text)]
    pages: list[Page] = []
    heading = ""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line)
        if found:
            if "".join(lines).strip():
                pages.append(Page("\n".join(lines), heading))
            heading, lines = _quote(found.group(2)), [line]
        else:
            lines.append(line)
    if "".join(lines).strip():
        pages.append(Page("\n".join(lines), heading))
    return pages


def _quote(heading: str) -> str:
    flat = " ".join(heading.replace('"', "'").split())[:MAX_LOCATOR_CHARS]
    return f'"{flat}"'


def _pieces(text: str, limit: int) -> Iterable[str]:
    """Sentences, and a sentence longer than `limit` tokens cut into parts that fit."""
    for sentence in _SENTENCE.split(text):
        sentence = sentence.strip()
        if not sentence:
            continue
        if estimate_tokens(sentence) <= limit:
            yield sentence
            continue
        words = re.findall(r"\S+\s*", sentence)
        part = ""
        for word in words if len(words) > 1 else list(sentence):
            if part and estimate_tokens(part + word) > limit:
                yield part.strip()
                part = ""
            part += word
        if part.strip():
            yield part.strip()


def _join(parts: Sequence[str]) -> str:
    out = ""
    for part in parts:
        if out and not (_is_cjk_edge(out[-1]) and _is_cjk_edge(part[0])):
            out += " "
        out += part
    return out


def _is_cjk_edge(char: str) -> bool:
    return ord(char) >= 0x2E80


def chunk_pages(pages: Sequence[Page], chunk_tokens: int, overlap: int) -> list[Passage]:
    """Passages of at most about `chunk_tokens`, the last `overlap` tokens of one repeated
    at the start of the next, never crossing a page."""
    passages: list[Passage] = []
    for page in pages:
        current: list[str] = []
        size = 0
        for piece in _pieces(page.text, chunk_tokens):
            cost = estimate_tokens(piece)
            if current and size + cost > chunk_tokens:
                passages.append(Passage(_join(current), page.locator, ordinal=len(passages)))
                kept: list[str] = []
                kept_size = 0
                for prior in reversed(current):
                    prior_cost = estimate_tokens(prior)
                    if kept_size + prior_cost > overlap:
                        break
                    kept.insert(0, prior)
                    kept_size += prior_cost
                current, size = kept, kept_size
            current.append(piece)
            size += cost
        if current:
            passages.append(Passage(_join(current), page.locator, ordinal=len(passages)))
    return passages
