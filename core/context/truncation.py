"""Cutting one system-prompt section at a readable boundary within a token target.

The longest prefix that fits, cut at a line end, else a sentence end, else a word, never
inside a grapheme, found in a handful of counts rather than one per character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

SECTION_SEPARATOR = "\n\n"
TRUNCATION_MARKER = "…[truncated]"
_MARKER_LINE = "\n" + TRUNCATION_MARKER
_SENTENCE_END = re.compile(r"(?:[.!?;…]+[\"'”’)\]]*(?=\s))|(?:[。！？；…]+[”’」』）]*)")


CUT_NOTE = "\n…(message cut to fit the context window)"


class Counts(Protocol):
    def count(self, text: str) -> int: ...


def cut_message(counter: Counts, text: str, target: int) -> tuple[str, int]:
    """The longest prefix of a current message (plus a note) within `target` tokens, and
    its count; ("", 0) when not even the note fits."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid] + CUT_NOTE) <= target:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo] + CUT_NOTE
    count = counter.count(cut)
    return ("", 0) if count > target else (cut, count)


@dataclass(frozen=True)
class Cut:
    """A truncated rendering of one section."""

    text: str
    sep_tokens: int  # count(text + SECTION_SEPARATOR)
    kept_chars: int


def cut_section(
    name: str,
    content: str,
    full_tokens: int,
    target: int,
    count: Callable[[str], int],
    min_tokens: int,
) -> Cut | None:
    """The longest boundary-cut "# name\ncontent" whose text + separator fits `target`.

    `full_tokens` is the uncut section's count with its separator (the search's upper
    anchor). None when less than `min_tokens` of content would be left, or nothing at all.
    """
    header = f"# {name}\n"

    def section(p: int) -> str:
        return header + content[:p].rstrip() + _MARKER_LINE

    def cost(p: int) -> int:
        return count(section(p) + SECTION_SEPARATOR)

    floor = cost(0)
    if target < floor + min_tokens:
        return None
    p_max = largest_fitting(len(content), floor, full_tokens, target, cost)
    q = snap(content, p_max)
    q_cost = cost(q) if q != p_max else -1
    if q_cost < 0 or q_cost > target:
        q = p_max
        q_cost = cost(q)
    if q_cost > target or q_cost - floor < min_tokens:
        return None
    if not content[:q].strip():
        return None
    return Cut(text=section(q), sep_tokens=q_cost, kept_chars=q)


def largest_fitting(
    length: int, f_lo: int, f_hi: int, target: int, cost: Callable[[int], int]
) -> int:
    """Largest p in [0, length) with cost(p) <= target, for a near-linear cost.

    Interpolation search with a bisection step whenever interpolation fails to halve the
    interval, so a long component costs a handful of counts, not log2(length).
    """
    lo, hi = 0, length
    bisect_next = False
    while hi - lo > 1:
        span = hi - lo
        if bisect_next or f_hi <= f_lo:
            guess = lo + span // 2
        else:
            guess = lo + int(span * (target - f_lo) / (f_hi - f_lo))
        guess = min(max(guess, lo + 1), hi - 1)
        value = cost(guess)
        if value <= target:
            lo, f_lo = guess, value
        else:
            hi, f_hi = guess, value
        bisect_next = (hi - lo) * 2 > span
    return lo


def snap(text: str, p: int) -> int:
    """Move a cut back to a line end, else a sentence end, else a word; never mid-grapheme."""
    if p <= 0:
        return 0
    line = text.rfind("\n", 0, p)
    if line >= p // 2 and text[:line].strip():
        return line
    sentence = -1
    for match in _SENTENCE_END.finditer(text, (p * 3) // 5, p):
        sentence = match.end()
    if sentence > 0:
        return sentence
    space = text.rfind(" ", 0, p)
    if space >= (p * 4) // 5:
        return space
    q = p
    for _ in range(8):
        if q <= 1:
            break
        here, before = text[q], text[q - 1]
        if (
            unicodedata.combining(here)
            or here in "\u200d\ufe0e\ufe0f\n"
            or before == "\u200d"
            or 0x1F3FB <= ord(here) <= 0x1F3FF  # skin-tone modifiers
        ):
            q -= 1
            continue
        break
    return q
