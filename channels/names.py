"""Display names from chat platforms, made safe to show, store and put in a prompt.

Why: a nickname is attacker-controlled text. Control characters break log lines and
prompts; bidi overrides (U+202E...) make "evil" render as "live" and can disguise who
said what; a lone surrogate cannot even be encoded as UTF-8 for the database; and a
2,000-character name would eat the context budget. Emoji and RTL scripts are fine and
are kept: only the invisible tricks go.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_CHARS = 64

# Explicit bidi embeddings/overrides/isolates and the directional marks.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
# Format characters that are invisible padding rather than part of a visible glyph.
_INVISIBLE = frozenset("\u00ad\u180e\u200b\u2060\u2061\u2062\u2063\u2064\ufeff\ufff9\ufffa\ufffb")
# Characters that only make sense attached to what comes before them; a name cut right
# after one of these would leave half an emoji sequence.
_JOINERS = frozenset("\u200d\ufe0e\ufe0f")
_SPACES = re.compile(r"\s+")


def clean_display_name(name: str | None, *, fallback: str = "", limit: int = MAX_NAME_CHARS) -> str:
    """Strip control/bidi/invisible characters, collapse whitespace, cap at `limit` chars.

    Returns `fallback` when nothing visible is left (e.g. a name made only of U+202E).
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    if not name:
        return fallback
    kept: list[str] = []
    for char in name:
        category = unicodedata.category(char)
        if category in ("Cc", "Zl", "Zp") or char.isspace():
            kept.append(" ")  # a newline in a name becomes a space, not a new prompt line
        elif category == "Cs" or char in _BIDI_CONTROLS or char in _INVISIBLE:
            continue
        else:
            kept.append(char)
    cleaned = _SPACES.sub(" ", "".join(kept)).strip()
    if len(cleaned) > limit:
        cleaned = _cut(cleaned, limit)
    cleaned = cleaned.strip()
    return cleaned if _visible(cleaned) else fallback


def _cut(text: str, limit: int) -> str:
    """Cut to `limit` code points without leaving a dangling joiner or combining mark."""
    cut = text[:limit]
    while cut and (cut[-1] in _JOINERS or unicodedata.combining(cut[-1])):
        cut = cut[:-1]
    return cut


def _visible(text: str) -> bool:
    return any(not unicodedata.category(c).startswith(("Z", "C", "M")) for c in text)
