"""The model's Markdown parsed (markdown-it-py, CommonMark + tables + strikethrough) and
laid out as text with styled ranges, the common ground of every chat platform.

Why a real parser: models write nested emphasis, fences inside lists and stray `*`; a
regex pass breaks on exactly the replies that matter. Raw HTML is never interpreted (it
shows as the literal text it is), links are never guessed from bare text (linkify off).
Inline tokens are walked with an explicit stack, not recursion, because emphasis nesting
is not bounded by the parser's nesting limit (`*` x 5,000 nests 2,500 deep).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from channels.formatting.cjk import use_cjk_emphasis
from channels.formatting.layout import (
    Layout,
    LayoutBuilder,
    Span,
    SpanKind,
    join_layouts,
    prefix_lines,
    strip_layout,
)
from channels.formatting.tables import CENTER, LEFT, RIGHT, layout_table

BULLET = "• "
RULE = "———"
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.\-]{1,32}")
# Blocks nested deeper than this are dropped by the parser (CommonMark preset: 20).
_MAX_NESTING = 100
_EMPHASIS = {"em": SpanKind.ITALIC, "strong": SpanKind.BOLD, "s": SpanKind.STRIKETHROUGH}


@dataclass(frozen=True)
class RenderStyle:
    """What a platform can show natively.

    link_schemes: URL schemes that become link spans; any other link reads "text (url)".
    quote_prefix: written before each quoted line ("" when the platform draws quotes
    from the blockquote span itself).
    """

    link_schemes: frozenset[str] = frozenset()
    quote_prefix: str = ""


def clean_text(text: str) -> str:
    """Replace lone surrogates (from bad decoding) with U+FFFD and join split pairs.

    Why: such a string cannot be encoded as UTF-8, so any send of it would fail.
    """
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def new_parser() -> MarkdownIt:
    """CommonMark with tables and strikethrough; raw HTML off; every link destination
    kept so the renderer, not the parser, decides what may become a clickable link.
    The nesting limit is raised so a deep list in a quote in a list keeps its text."""
    options = {"html": False, "linkify": False, "typographer": False, "maxNesting": _MAX_NESTING}
    parser = use_cjk_emphasis(MarkdownIt("commonmark", options))  # `**注意：**这是` is bold
    parser.enable(["table", "strikethrough"])
    parser.validateLink = _accept_any_link  # type: ignore[method-assign]
    return parser


def _accept_any_link(url: str) -> bool:
    return True


def render_layout(markdown: str, style: RenderStyle, parser: MarkdownIt | None = None) -> Layout:
    """Lay out `markdown` for `style`: blocks separated by blank lines, outer whitespace
    stripped. Never raises on any string."""
    md = parser or new_parser()
    source = clean_text(markdown).replace("\x00", "\ufffd")
    walker = _Walker(style, md)
    layout = strip_layout(walker.blocks(_block_tree(md.parse(source)), "\n\n"))
    if not layout.text and source.strip():
        # only possible past the nesting limit or with nothing but link definitions:
        # an empty message cannot be sent, the source itself can
        return Layout(source.strip())
    return layout


@dataclass
class _Block:
    """A block token with the block tokens between it and its closing token."""

    token: Token
    children: list[_Block] = field(default_factory=list)


def _block_tree(tokens: list[Token]) -> list[_Block]:
    root = _Block(Token("root", "", 0))
    stack = [root]
    for token in tokens:
        if token.nesting == 1:
            node = _Block(token)
            stack[-1].children.append(node)
            stack.append(node)
        elif token.nesting == -1:
            if len(stack) > 1:
                stack.pop()
        else:
            stack[-1].children.append(_Block(token))
    return root.children


class _Walker:
    def __init__(self, style: RenderStyle, parser: MarkdownIt) -> None:
        self._style = style
        self._parser = parser

    def blocks(self, nodes: list[_Block], separator: str) -> Layout:
        return join_layouts([self._block(node) for node in nodes], separator)

    def _block(self, node: _Block) -> Layout:
        kind = node.token.type.removesuffix("_open")
        if kind == "inline":
            return self._inline(node.token)
        if kind in ("paragraph", "heading"):
            inner = self.blocks(node.children, "\n")
            if kind == "heading" and inner.text:
                return Layout(inner.text, (*inner.spans, Span(SpanKind.BOLD, 0, len(inner.text))))
            return inner
        if kind == "blockquote":
            return self._blockquote(node)
        if kind in ("bullet_list", "ordered_list"):
            return self._list(node)
        if kind in ("fence", "code_block"):
            return _code_block(node.token)
        if kind == "hr":
            return Layout(RULE)
        if kind == "table":
            return self._table(node)
        if node.children:
            return self.blocks(node.children, "\n\n")
        return Layout(node.token.content)

    def _blockquote(self, node: _Block) -> Layout:
        inner = self.blocks(node.children, "\n\n")
        if not inner.text:
            return inner
        prefix = self._style.quote_prefix
        if prefix:
            inner = prefix_lines(inner, prefix, prefix, skip_pre=False)
        return Layout(inner.text, (*inner.spans, Span(SpanKind.BLOCKQUOTE, 0, len(inner.text))))

    def _list(self, node: _Block) -> Layout:
        tight = all(
            paragraph.token.hidden
            for item in node.children
            for paragraph in item.children
            if paragraph.token.type == "paragraph_open"
        )
        ordered = node.token.type == "ordered_list_open"
        number = _list_start(node.token)
        items: list[Layout] = []
        for item in node.children:
            marker = f"{number}. " if ordered else BULLET
            number += 1
            content = self.blocks(item.children, "\n" if tight else "\n\n")
            if any(span.kind == SpanKind.PRE and span.start == 0 for span in content.spans):
                # a code block opening the item starts on the line after its marker
                content = Layout("\n" + content.text, tuple(s.shifted(1) for s in content.spans))
            items.append(prefix_lines(content, marker, " " * len(marker), skip_pre=True))
        return join_layouts(items, "\n" if tight else "\n\n")

    def _table(self, node: _Block) -> Layout:
        rows: list[list[str]] = []
        aligns: list[str | None] = []
        cell_walker = _Walker(RenderStyle(), self._parser)  # no links inside a code block
        for row in _descendants(node, "tr_open"):
            cells = [cell for cell in row.children if cell.token.type in ("th_open", "td_open")]
            if not rows:
                aligns = [_alignment(cell.token) for cell in cells]
            rows.append([cell_walker.blocks(cell.children, " ").text for cell in cells])
        text = layout_table(rows, aligns)
        return Layout(text, (Span(SpanKind.PRE, 0, len(text)),) if text else ())

    def _inline(self, token: Token) -> Layout:
        out = LayoutBuilder()
        stack: list[tuple[Token, int, int]] = []  # open token, start offset, text mark
        for child in token.children or ():
            if child.nesting == 1:
                stack.append((child, out.length, out.mark()))
            elif child.nesting == -1:
                if stack:
                    opened, start, mark = stack.pop()
                    self._close(out, opened, start, out.text_since(mark))
            else:
                text = self._inline_text(child)
                out.write(text)
                if child.type == "code_inline":
                    out.add_span(SpanKind.CODE, out.length - len(text))
        return out.build()

    def _inline_text(self, token: Token) -> str:
        if token.type in ("softbreak", "hardbreak"):
            return "\n"
        if token.type == "image":
            url = self._display_url(str(token.attrs.get("src", "")))
            alt = token.content.strip()
            return f"{alt} ({url})" if alt and alt != url else url
        return token.content

    def _close(self, out: LayoutBuilder, token: Token, start: int, text: str) -> None:
        if token.tag in _EMPHASIS:
            out.add_span(_EMPHASIS[token.tag], start)
        elif token.type == "link_open":
            href = str(token.attrs.get("href", ""))
            display = self._display_url(href)
            if not text.strip():
                out.write(display)
            elif _scheme(href) in self._style.link_schemes and _linkable(href):
                out.add_span(SpanKind.LINK, start, url=href)
            elif display and text not in (href, display, display.removeprefix("mailto:")):
                out.write(f" ({display})")

    def _display_url(self, url: str) -> str:
        """The URL as a reader should see it: percent-escapes decoded unless that would
        put a space in it (a URL with a space is no longer clickable as plain text)."""
        readable = self._parser.normalizeLinkText(url)
        return url if any(char.isspace() for char in readable) else readable


def _code_block(token: Token) -> Layout:
    content = token.content.removesuffix("\n")
    if not content.strip():
        return Layout("")
    words = token.info.split()
    language = words[0] if words and _LANGUAGE.fullmatch(words[0]) else None
    return Layout(content, (Span(SpanKind.PRE, 0, len(content), language=language),))


def _list_start(token: Token) -> int:
    try:
        return int(str(token.attrs.get("start", 1)))
    except ValueError:
        return 1


def _descendants(node: _Block, token_type: str) -> list[_Block]:
    found: list[_Block] = []
    pending = list(reversed(node.children))
    while pending:
        current = pending.pop()
        if current.token.type == token_type:
            found.append(current)
        else:
            pending.extend(reversed(current.children))
    return found


def _alignment(token: Token) -> str | None:
    style = str(token.attrs.get("style", ""))
    for align in (LEFT, RIGHT, CENTER):
        if style == f"text-align:{align}":
            return align
    return None


def _scheme(url: str) -> str:
    head, colon, _ = url.partition(":")
    return head.lower() if colon else ""


def _linkable(url: str) -> bool:
    """A well-formed URL Telegram accepts for a text link (else the send would fail)."""
    if len(url) > 2048 or any(char.isspace() or ord(char) < 32 for char in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        return bool(parts.hostname)
    if scheme == "mailto":
        return "@" in parts.path
    if scheme == "tg":
        return bool(parts.netloc or parts.path)
    return False
