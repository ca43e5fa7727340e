"""The model's Markdown as a Telegram message: plain text plus message entities.

Why entities instead of parse_mode: the text is sent exactly as written, nothing in it can
be misread as markup, so "can't parse entities" cannot happen. Offsets and lengths are in
UTF-16 code units (https://core.telegram.org/bots/api#messageentity), and the entities
follow Telegram's nesting rules so the server keeps them as they are:
- ranges either nest or are disjoint; nothing is empty or outside the text;
- nothing inside `pre`/`code`; `pre`/`code` inside nothing but a blockquote;
- no blockquote inside a blockquote, no link inside a link.
Send with parse_mode=None and entities=...; if Telegram still refuses, send the same text
with no entities (see `to_bot_api`).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt

from channels.formatting.layout import Layout, Span, SpanKind
from channels.formatting.markdown import RenderStyle, new_parser, render_layout

TELEGRAM_STYLE = RenderStyle(link_schemes=frozenset({"http", "https", "tg", "mailto"}))

_ENTITY_TYPE = {
    SpanKind.BOLD: "bold",
    SpanKind.ITALIC: "italic",
    SpanKind.STRIKETHROUGH: "strikethrough",
    SpanKind.CODE: "code",
    SpanKind.PRE: "pre",
    SpanKind.LINK: "text_link",
    SpanKind.BLOCKQUOTE: "blockquote",
}
_SPLITTABLE = frozenset({SpanKind.BOLD, SpanKind.ITALIC, SpanKind.STRIKETHROUGH})
_VERBATIM = frozenset({SpanKind.CODE, SpanKind.PRE})
# For equal ranges the container comes first (blockquote outside everything).
_NESTING_ORDER = {
    SpanKind.BLOCKQUOTE: 0,
    SpanKind.LINK: 1,
    SpanKind.PRE: 2,
    SpanKind.CODE: 3,
    SpanKind.BOLD: 4,
    SpanKind.ITALIC: 5,
    SpanKind.STRIKETHROUGH: 6,
}
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


@dataclass(frozen=True, slots=True)
class Entity:
    """One Bot API MessageEntity; offset and length in UTF-16 code units."""

    type: str
    offset: int
    length: int
    url: str | None = None
    language: str | None = None
    user_id: int | None = None  # a text_mention: the person it names (and notifies)

    @property
    def end(self) -> int:
        return self.offset + self.length

    def to_bot_api(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "offset": self.offset, "length": self.length}
        if self.url is not None:
            data["url"] = self.url
        if self.language is not None:
            data["language"] = self.language
        if self.user_id is not None:
            data["user"] = {"id": self.user_id, "is_bot": False, "first_name": "-"}
        return data


@dataclass(frozen=True, slots=True)
class FormattedText:
    """Message text and its entities, ready for sendMessage / editMessageText."""

    text: str
    entities: tuple[Entity, ...] = ()

    def to_bot_api(self) -> list[dict[str, Any]]:
        """Entities as Bot API dicts; `telegram.MessageEntity(**d)` builds PTB objects."""
        return [entity.to_bot_api() for entity in self.entities]

    @property
    def utf16_length(self) -> int:
        return utf16_length(self.text)


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's limits and offsets."""
    return len(text) + len(_ASTRAL.findall(text))


def render_telegram(markdown: str, parser: MarkdownIt | None = None) -> FormattedText:
    """Render the model's Markdown as text + entities; never raises on any string.

    Pass a `parser` from `new_parser()` to reuse it across calls (it is not shared state:
    parsing does not change it).
    """
    layout = render_layout(markdown, TELEGRAM_STYLE, parser or new_parser())
    return FormattedText(layout.text, _entities(layout))


def _entities(layout: Layout) -> tuple[Entity, ...]:
    spans = _canonical(list(layout.spans))
    astral = [match.start() for match in _ASTRAL.finditer(layout.text)]

    def units(offset: int) -> int:
        return offset + bisect_left(astral, offset)

    entities = []
    for span in spans:
        start, end = units(span.start), units(span.end)
        entities.append(
            Entity(_ENTITY_TYPE[span.kind], start, end - start, span.url, span.language)
        )
    return tuple(entities)


def _canonical(spans: list[Span]) -> list[Span]:
    """Spans reshaped to Telegram's nesting rules (see the module docstring).

    Spans from the walker already nest properly; here they lose what Telegram would
    drop: styles inside code, code inside links, a style inside the same style (a quote
    in a quote). Bold/italic/strikethrough around code are split so the code stands
    outside them.
    """
    spans = [span for span in spans if span.end > span.start]
    links = _DisjointRanges(span for span in spans if span.kind == SpanKind.LINK)
    verbatim = _DisjointRanges(
        span for span in spans if span.kind in _VERBATIM and not links.contain(span)
    )
    result: list[Span] = []
    kind_end: dict[SpanKind, int] = {}  # where the outermost span of each kind ends so far
    for span in sorted(spans, key=_sort_key):
        if span.start < kind_end.get(span.kind, -1):
            continue  # nested in a span of its own kind (a quote in a quote): already shown
        kind_end[span.kind] = span.end
        if span.kind in _VERBATIM:
            if not links.contain(span):
                result.append(span)
        elif verbatim.contain(span):
            continue  # Telegram shows code literally, styles inside it would be dropped
        elif span.kind in _SPLITTABLE:
            result.extend(verbatim.cut_out_of(span))
        else:
            result.append(span)
    return sorted(result, key=_sort_key)


def _sort_key(span: Span) -> tuple[int, int, int]:
    return (span.start, -span.end, _NESTING_ORDER[span.kind])


class _DisjointRanges:
    """Sorted spans of one family, the outermost kept where one contains another;
    answers "which of them contains this span" in log time."""

    def __init__(self, spans: Iterable[Span]) -> None:
        self.spans: list[Span] = []
        for span in sorted(spans, key=_sort_key):
            if not self.spans or span.start >= self.spans[-1].end:
                self.spans.append(span)
        self._starts = [span.start for span in self.spans]

    def contain(self, span: Span) -> bool:
        index = bisect_right(self._starts, span.start) - 1
        if index < 0:
            return False
        outer = self.spans[index]
        return outer is not span and span.end <= outer.end

    def cut_out_of(self, span: Span) -> list[Span]:
        """`span` minus the ranges inside it, as the pieces left over."""
        index = bisect_left(self._starts, span.start)
        pieces: list[Span] = []
        cursor = span.start
        while index < len(self.spans) and self.spans[index].start < span.end:
            hole = self.spans[index]
            if hole.start > cursor:
                pieces.append(Span(span.kind, cursor, hole.start))
            cursor = max(cursor, hole.end)
            index += 1
        if span.end > cursor:
            pieces.append(Span(span.kind, cursor, span.end))
        return pieces


def entity_problems(formatted: FormattedText) -> list[str]:
    """What Telegram would refuse or silently change in `formatted` (empty when none).

    Checks the rules in the module docstring plus text that cannot be sent at all:
    empty or not encodable as UTF-8. For tests and for logging before a send.
    """
    text = formatted.text
    problems: list[str] = []
    if not text.strip():
        problems.append("text is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        problems.append("text is not valid Unicode (lone surrogate)")
        return problems
    encoded = text.encode("utf-16-le")
    total = len(encoded) // 2
    ordered = sorted(formatted.entities, key=lambda e: (e.offset, -e.length))
    open_entities: list[Entity] = []
    for entity in ordered:
        problems.extend(_entity_alone(entity, encoded, total))
        while open_entities and open_entities[-1].end <= entity.offset:
            open_entities.pop()
        if open_entities and entity.end > open_entities[-1].end:
            problems.append(f"{entity} overlaps {open_entities[-1]} partially")
        outer_types = {outer.type for outer in open_entities}
        if outer_types & {"pre", "code"}:
            problems.append(f"{entity} is inside pre/code")
        elif entity.type in ("pre", "code") and outer_types - {"blockquote"}:
            problems.append(f"{entity} is inside {sorted(outer_types)}")
        if entity.type in outer_types:
            problems.append(f"{entity} is nested in another {entity.type}")
        open_entities.append(entity)
    return problems


def _entity_alone(entity: Entity, encoded: bytes, total: int) -> list[str]:
    problems = []
    if entity.type not in _ENTITY_TYPE.values():
        problems.append(f"{entity} has an unknown type")
    if entity.offset < 0 or entity.length <= 0 or entity.end > total:
        problems.append(f"{entity} is empty or outside the text ({total} units)")
        return problems
    for boundary in (entity.offset, entity.end):
        if boundary < total and 0xDC00 <= _unit(encoded, boundary) <= 0xDFFF:
            problems.append(f"{entity} cuts a surrogate pair at {boundary}")
    if entity.type == "text_link" and not entity.url:
        problems.append(f"{entity} has no url")
    return problems


def _unit(encoded: bytes, index: int) -> int:
    return int.from_bytes(encoded[2 * index : 2 * index + 2], "little")
