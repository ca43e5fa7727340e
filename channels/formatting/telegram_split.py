"""A formatted Telegram message cut into pieces that each fit the message limit.

Why here and not on the Markdown: the limit applies to the text after entity parsing,
counted in UTF-16 units, so only the rendered text can be measured. Each piece carries
the part of every entity that falls inside it, re-based to the piece: an entity crossing
a cut becomes one entity per piece, and a code block split in two stays `pre` with its
language in both.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from itertools import accumulate

from channels.formatting.telegram import Entity, FormattedText

MESSAGE_LIMIT = 4096

# Cut points, best first. Each match is the separator dropped at the cut: paragraph
# break, line break, the space after a sentence (none needed after CJK punctuation),
# a space. Indentation after a line break is kept: it belongs to the next line.
_BOUNDARIES = (
    re.compile(r"[^\S\n]*\n(?:[^\S\n]*\n)+"),
    re.compile(r"[^\S\n]*\n"),
    re.compile(r"(?<=[.!?])[^\S\n]+|(?<=[。！？…])[^\S\n]*"),
    re.compile(r"[^\S\n]+"),
)
_JOINERS = frozenset("\u200d\u20e3")  # zero-width joiner, combining keycap


def split_formatted(formatted: FormattedText, limit: int = MESSAGE_LIMIT) -> list[FormattedText]:
    """Pieces of at most `limit` UTF-16 units, cut at the best boundary.

    Prefers paragraph, then line, then sentence, then word boundaries (a piece shorter
    than a third of the limit is avoided when a finer boundary gives a longer one); a
    run with no boundary is cut hard, never inside a surrogate pair and not inside an
    emoji sequence. The whitespace at a cut is dropped; nothing else is, so the pieces
    joined with those separators give back the text. A piece of only whitespace is never
    returned, so an empty or blank text gives no pieces.
    """
    if limit < 2:
        raise ValueError("limit must be at least 2 UTF-16 units (one emoji)")
    text = formatted.text
    units = [0, *accumulate(2 if ord(char) > 0xFFFF else 1 for char in text)]
    if units[-1] <= limit:
        return [formatted] if text.strip() else []
    pieces: list[FormattedText] = []
    start = 0
    while start < len(text):
        end = bisect_right(units, units[start] + limit) - 1
        if end >= len(text):
            cut = resume = len(text)
        else:
            cut, resume = _best_cut(text, units, start, end, limit)
        if text[start:cut].strip():
            pieces.append(_piece(formatted, units[start], units[cut], text[start:cut]))
        start = resume
    return pieces


def _best_cut(text: str, units: list[int], start: int, end: int, limit: int) -> tuple[int, int]:
    """(end of this piece, start of the next) for a piece starting at `start` that may
    run to `end` at most."""
    shortest = units[start] + limit // 3
    for level, pattern in enumerate(_BOUNDARIES):
        best = None
        for match in pattern.finditer(text, start, end + 1):
            if start < match.start() <= end and units[match.start()] >= shortest:
                best = match.start()
        if best is not None:
            # the window may have cut the separator short (a paragraph break seen as a
            # line break at its edge): measure it on the whole text
            ends = [p.match(text, best) for p in _BOUNDARIES[: level + 1]]
            return best, max(m.end() for m in ends if m is not None)
    cut = _hard_cut(text, start, end)
    return cut, cut


def _hard_cut(text: str, start: int, end: int) -> int:
    """`end`, moved back so the cut does not fall inside an emoji or accent sequence."""
    cut = end
    while cut > start + 1 and cut > end - 32 and _glued(text, cut):
        cut -= 1
    return end if _glued(text, cut) else cut


def _glued(text: str, cut: int) -> bool:
    """Whether text[cut - 1] and text[cut] belong to one visible character."""
    before, after = text[cut - 1], text[cut]
    if before in _JOINERS or after in _JOINERS:
        return True
    if "\ufe00" <= after <= "\ufe0f" or "\U0001f3fb" <= after <= "\U0001f3ff":
        return True  # variation selector, skin tone
    if "\U000e0020" <= after <= "\U000e007f":
        return True  # tag characters of flag sequences
    if unicodedata.combining(after):
        return True
    if _regional(before) and _regional(after):
        run = 0
        while cut - run - 1 >= 0 and _regional(text[cut - run - 1]):
            run += 1
        return run % 2 == 1  # an odd count before the cut: this cut splits a flag
    return False


def _regional(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def _piece(formatted: FormattedText, low: int, high: int, text: str) -> FormattedText:
    """The entities clipped to units [low, high) and re-based to the piece."""
    entities = []
    for entity in formatted.entities:
        start, end = max(entity.offset, low), min(entity.end, high)
        if end > start:
            entities.append(
                Entity(entity.type, start - low, end - start, entity.url, entity.language)
            )
    return FormattedText(text, tuple(entities))
