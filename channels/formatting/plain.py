"""The model's Markdown as readable plain text, for platforms that show no formatting
(QQ through OneBot v11).

What the reader gets: no `**`, `__`, `~~`, `#`, backtick fences or `[text](url)`; code
verbatim, a code block as its own lines between blank lines (never indented, so it can
be copied as is); links as "text (url)", or just the url when the text is the url;
lists with "• " and "1. ", nested ones indented; headings as their text on a line of
their own; tables as aligned rows; a horizontal rule as "———". Quoted lines start with
"> " (every line of the quote, code lines included, so the reader sees where it ends).
"""

from __future__ import annotations

from markdown_it import MarkdownIt

from channels.formatting.markdown import RenderStyle, new_parser, render_layout

QUOTE_PREFIX = "> "
PLAIN_STYLE = RenderStyle(link_schemes=frozenset(), quote_prefix=QUOTE_PREFIX)


def render_plain(markdown: str, parser: MarkdownIt | None = None) -> str:
    """Render `markdown` as plain text; never raises on any string.

    Pass a `parser` from `new_parser()` to reuse it across calls.
    """
    return render_layout(markdown, PLAIN_STYLE, parser or new_parser()).text
