"""Emphasis that works in Chinese, Japanese and Korean text, as models write it.

Why: CommonMark decides whether `**` opens or closes emphasis by what is on either
side. A closing `**` after punctuation must be followed by a space or punctuation, so
`**注意：**这是重点` (bold ending in a full-width colon, the next word right after it,
as CJK text has no spaces) keeps its literal `**` in every CommonMark renderer, and
models write exactly this.

The rule here: where CommonMark asks for whitespace or punctuation on the far side of
a delimiter run that touches punctuation, a CJK character counts too. Text without CJK
characters parses as plain CommonMark; `_` keeps its intraword rule (snake_case stays).
"""

from __future__ import annotations

from bisect import bisect_right

from markdown_it import MarkdownIt
from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
from markdown_it.parser_inline import ParserInline
from markdown_it.rules_inline.state_inline import Scanned, StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType

# Scripts written without spaces between words, and their punctuation (inclusive ranges).
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation (、。「」…)
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Hangul compatibility Jamo, Kanbun, strokes
    (0x3200, 0x4DBF),  # enclosed CJK, compatibility, extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF00, 0xFFEF),  # half- and full-width forms (，：！（）…)
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)
_STARTS = [start for start, _ in _CJK_RANGES]


def is_cjk(char: str) -> bool:
    index = bisect_right(_STARTS, ord(char)) - 1
    return index >= 0 and ord(char) <= _CJK_RANGES[index][1]


def _punct(char: str) -> bool:
    return isMdAsciiPunct(ord(char)) or isPunctChar(char)


class CjkStateInline(StateInline):
    """Inline parser state whose delimiter runs follow the rule in the module docstring."""

    def scanDelims(self, start: int, canSplitWord: bool) -> Scanned:  # noqa: N802 (the API's name)
        marker = self.src[start]
        end = start
        while end < self.posMax and self.src[end] == marker:
            end += 1
        before = self.src[start - 1] if start > 0 else " "  # a line's edges count as space
        after = self.src[end] if end < self.posMax else " "
        space_before, space_after = isWhiteSpace(ord(before)), isWhiteSpace(ord(after))
        punct_before, punct_after = _punct(before), _punct(after)
        # CommonMark's "whitespace or punctuation" on the far side, widened by CJK.
        open_side = space_before or punct_before or is_cjk(before)
        close_side = space_after or punct_after or is_cjk(after)
        left_flanking = not space_after and (not punct_after or open_side)
        right_flanking = not space_before and (not punct_before or close_side)
        can_open = left_flanking and (canSplitWord or not right_flanking or punct_before)
        can_close = right_flanking and (canSplitWord or not left_flanking or punct_after)
        return Scanned(can_open, can_close, end - start)


class CjkParserInline(ParserInline):
    """The inline parser, with CjkStateInline as its state."""

    def parse(self, src: str, md: MarkdownIt, env: EnvType, tokens: list[Token]) -> list[Token]:
        state = CjkStateInline(src, md, env, tokens)
        self.tokenize(state)
        for rule in self.ruler2.getRules(""):
            rule(state)
        return state.tokens


def use_cjk_emphasis(parser: MarkdownIt) -> MarkdownIt:
    """Give `parser` the CJK-aware emphasis rule, keeping its enabled inline rules."""
    inline = CjkParserInline()
    inline.ruler, inline.ruler2 = parser.inline.ruler, parser.inline.ruler2
    parser.inline = inline
    return parser
