"""Split long replies to fit a platform's message limit without breaking sentences."""

from __future__ import annotations

import re

# Preferred cut points, best first: paragraph, line, sentence end (Latin and CJK), space.
_BOUNDARIES = (
    re.compile(r"\n\s*\n"),
    re.compile(r"\n"),
    re.compile(r"(?<=[.!?。！？…])\s*"),
    re.compile(r"\s+"),
)


def split_text(text: str, limit: int) -> list[str]:
    """Cut `text` into pieces of at most `limit` characters, at the best boundary.

    Why: a reply cut mid-word or mid-sentence reads as a glitch; a platform refuses a
    message over its limit. Falls back to a hard cut only for a run with no boundary.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = _best_cut(rest, limit)
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if head:
            pieces.append(head)
    if rest:
        pieces.append(rest)
    return pieces


def _best_cut(text: str, limit: int) -> int:
    window = text[: limit + 1]
    for pattern in _BOUNDARIES:
        ends = [m.end() for m in pattern.finditer(window) if 0 < m.start() <= limit]
        # ignore cuts that would leave a tiny first piece: better to try a finer boundary
        good = [end for end in ends if end >= limit // 3]
        if good:
            return (
                min(good[-1], limit) if good[-1] <= limit else _last_start(pattern, window, limit)
            )
    return limit


def _last_start(pattern: re.Pattern[str], window: str, limit: int) -> int:
    starts = [m.start() for m in pattern.finditer(window) if 0 < m.start() <= limit]
    return starts[-1] if starts else limit
