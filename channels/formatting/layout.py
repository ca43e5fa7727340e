"""Text with styled ranges: the shape a Markdown reply takes before a platform sees it.

Why a shared shape: Telegram turns the ranges into message entities, QQ drops them and
keeps the text. Offsets here count Python characters (code points); the Telegram module
converts them to UTF-16 units at the very end.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from enum import StrEnum


class SpanKind(StrEnum):
    """Kinds of styled range the Markdown walker produces."""

    BOLD = "bold"
    ITALIC = "italic"
    STRIKETHROUGH = "strikethrough"
    CODE = "code"
    PRE = "pre"
    LINK = "link"
    BLOCKQUOTE = "blockquote"


@dataclass(frozen=True, slots=True)
class Span:
    """A styled range [start, end) of a Layout's text, in code points."""

    kind: SpanKind
    start: int
    end: int
    url: str | None = None
    language: str | None = None

    def shifted(self, by: int) -> Span:
        return Span(self.kind, self.start + by, self.end + by, self.url, self.language)


@dataclass(frozen=True, slots=True)
class Layout:
    """Rendered text and its styled ranges (properly nested, none empty)."""

    text: str
    spans: tuple[Span, ...] = ()


class LayoutBuilder:
    """Appends text and records spans at absolute offsets; cheap for long replies."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self.length = 0
        self.spans: list[Span] = []

    def write(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self.length += len(text)

    def mark(self) -> int:
        """A position to read the text written since (see `text_since`)."""
        return len(self._parts)

    def text_since(self, mark: int) -> str:
        return "".join(self._parts[mark:])

    def add_span(self, kind: SpanKind, start: int, **extra: str | None) -> None:
        """Style [start, current end) as `kind`; an empty range is dropped."""
        if self.length > start:
            self.spans.append(Span(kind, start, self.length, **extra))

    def append(self, layout: Layout) -> None:
        base = self.length
        self.write(layout.text)
        self.spans.extend(span.shifted(base) for span in layout.spans)

    def build(self) -> Layout:
        return Layout("".join(self._parts), tuple(self.spans))


def join_layouts(layouts: list[Layout], separator: str) -> Layout:
    """Concatenate non-empty layouts with `separator` between them."""
    present = [layout for layout in layouts if layout.text]
    if len(present) == 1:
        return present[0]
    builder = LayoutBuilder()
    for layout in present:
        if builder.length:
            builder.write(separator)
        builder.append(layout)
    return builder.build()


def prefix_lines(layout: Layout, first: str, rest: str, *, skip_pre: bool) -> Layout:
    """Put `first` before the first line and `rest` before every other line.

    Empty lines get the prefix without its trailing spaces. With `skip_pre`, lines that
    start inside a code block are left alone so code stays verbatim (list indentation);
    without it every line is prefixed (a quote marker must show on every line).
    A span that contains a line start grows to cover the inserted prefix.
    """
    text = layout.text
    pre = (
        sorted((s.start, s.end) for s in layout.spans if s.kind == SpanKind.PRE) if skip_pre else []
    )
    pre_starts = [start for start, _ in pre]
    inserts: list[tuple[int, str]] = []
    line_start = 0
    while True:
        prefix = first if line_start == 0 else rest
        at_line_end = line_start == len(text) or text[line_start] == "\n"
        if at_line_end:
            prefix = prefix.rstrip()
        if prefix and not (line_start and _inside(pre, pre_starts, line_start)):
            inserts.append((line_start, prefix))
        newline = text.find("\n", line_start)
        if newline < 0:
            break
        line_start = newline + 1
    return _insert(layout, inserts)


def _inside(ranges: list[tuple[int, int]], starts: list[int], position: int) -> bool:
    index = bisect_right(starts, position) - 1
    return index >= 0 and ranges[index][0] <= position < ranges[index][1]


def _insert(layout: Layout, inserts: list[tuple[int, str]]) -> Layout:
    """Insert strings at sorted positions, moving spans: a span starting at a position
    moves after the insert, a span running through it grows."""
    if not inserts:
        return layout
    pieces: list[str] = []
    previous = 0
    positions: list[int] = []
    added: list[int] = []  # total inserted length up to and including each position
    total = 0
    for position, value in inserts:
        pieces.append(layout.text[previous:position])
        pieces.append(value)
        previous = position
        total += len(value)
        positions.append(position)
        added.append(total)
    pieces.append(layout.text[previous:])

    def moved(offset: int, *, include_equal: bool) -> int:
        index = bisect_right(positions, offset) if include_equal else bisect_left(positions, offset)
        return offset + (added[index - 1] if index else 0)

    spans = tuple(
        Span(
            span.kind,
            moved(span.start, include_equal=True),
            moved(span.end, include_equal=False),
            span.url,
            span.language,
        )
        for span in layout.spans
    )
    return Layout("".join(pieces), spans)


def strip_layout(layout: Layout) -> Layout:
    """Drop leading and trailing whitespace, clipping spans (an emptied span goes)."""
    text = layout.text
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    if start == 0 and end == len(text):
        return layout
    spans = tuple(
        Span(s.kind, max(s.start, start) - start, min(s.end, end) - start, s.url, s.language)
        for s in layout.spans
        if min(s.end, end) > max(s.start, start)
    )
    return Layout(text[start:end], spans)
