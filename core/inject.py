"""Channel-layer injection: who said it and what their pictures show, as plain data.

Why: in a group the model must know who is speaking, but a nickname or a message must
never be able to impersonate another speaker, the system, or a tag. Names are cleaned
once, here, for every channel and for the prompt; a line in the text that looks like a
speaker prefix is defused.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

MAX_NAME_CHARS = 64
MAX_TEXT_CHARS = 16_000

# Every character a reader may take for the end of a line (what str.splitlines() splits
# on): a message line may start after any of them, not only after "\n".
_LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
# Brackets and colons that read like the "[" "]" ":" of our speaker prefix: full-width
# forms, CJK corner and lenticular brackets, small and mathematical look-alikes.
_OPEN_LIKE = (
    "[\uff3b\u3010\u3014\u3016\u3018\u301a\u27e6\u2045\u2772\ufe5d\uff62\u300c\u300e"
    "\u298b\u298d\u298f"
)
_CLOSE_LIKE = (
    "]\uff3d\u3011\u3015\u3017\u3019\u301b\u27e7\u2046\u2773\ufe5e\uff63\u300d\u300f"
    "\u298c\u298e\u2990"
)
# Matching is done on the NFKC form of a line, so the vertical presentation forms (U+FE39..
# U+FE48) and the small and full-width forms count as the brackets they fold to; colons
# that no normalisation folds (triangular U+02D0, Lisu U+A4FD, two-dot U+205A) are listed.
_COLON_LIKE = (
    ":\uff1a\ufe55\ufe13\ua789\u2236\u02f8\u0589\u05c3\u1361\u1804\u2982\ufe30"
    "\u02d0\ua4fd\u205a\u16ec\u0703\u0704"
)
# Invisible characters that could sit between the parts of a prefix without showing.
_PAD = "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"


def _folds_into(chars: str) -> str:
    """Every BMP character whose NFKC form is one of `chars` (or is one), e.g. U+FE47."""
    found = [chr(c) for c in range(0x10000) if unicodedata.normalize("NFKC", chr(c)) in chars]
    return "".join(dict.fromkeys(chars + "".join(found)))


_BRACKETS = str.maketrans(
    dict.fromkeys(_folds_into(_OPEN_LIKE), "(") | dict.fromkeys(_folds_into(_CLOSE_LIKE), ")")
)
# A line beginning like "[Alice]: ..." (or "［Alice］：...") would read as another
# speaker's turn.
_SPEAKER_PREFIX = re.compile(
    rf"[\s{_PAD}]*[{re.escape(_OPEN_LIKE)}][^\n{re.escape(_CLOSE_LIKE)}]{{0,80}}"
    rf"[{re.escape(_CLOSE_LIKE)}][\s{_PAD}]*[{re.escape(_COLON_LIKE)}]"
)
_LEAD = re.compile(rf"[\s{_PAD}]*")
# Enough of a line to hold any prefix (padding aside): only this much is normalised.
_PREFIX_WINDOW = 256
# Explicit bidi embeddings/overrides/isolates and the directional marks.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
# Format characters that are invisible padding rather than part of a visible glyph, and
# the deprecated format controls U+206A..U+206F.
_INVISIBLE = frozenset(
    "\u00ad\u180e\u200b\u2060\u2061\u2062\u2063\u2064\ufeff\ufff9\ufffa\ufffb"
    "\u206a\u206b\u206c\u206d\u206e\u206f"
)
# Unicode tag characters mirror ASCII invisibly: a name could smuggle hidden text to the model.
_TAGS = range(0xE0000, 0xE0080)
# Characters that only make sense attached to what comes before them; a name cut right
# after one of these would leave half an emoji sequence.
_JOINERS = frozenset("\u200d\ufe0e\ufe0f")
_SPACES = re.compile(r"\s+")


def clean_name(name: str | None, fallback: str = "", *, limit: int = MAX_NAME_CHARS) -> str:
    """A display name safe to show, store and put in a prompt; `fallback` if none is left.

    A nickname is attacker-controlled text: control characters break log lines and
    prompts, bidi overrides (U+202E...) make "evil" render as "live", a lone surrogate
    cannot be stored as UTF-8, brackets could forge a `[speaker]:` prefix, and a
    2,000-character name would eat the context budget. Emoji (with their joiners) and RTL
    scripts are kept: only the invisible tricks go. Capped at `limit` characters.
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
        elif not _hidden(char, category):
            kept.append(char)
    cleaned = _SPACES.sub(" ", "".join(kept)).strip()
    cleaned = cleaned.translate(_BRACKETS)
    if len(cleaned) > limit:
        cleaned = _cut(cleaned, limit).strip()
    return cleaned if _visible(cleaned) else fallback


def _hidden(char: str, category: str) -> bool:
    """Invisible tricks: lone surrogates, bidi controls, padding, tag characters."""
    return category == "Cs" or char in _BIDI_CONTROLS or char in _INVISIBLE or ord(char) in _TAGS


def _cut(text: str, limit: int) -> str:
    """Cut to `limit` code points without leaving a dangling joiner or combining mark."""
    cut = text[:limit]
    while cut and (cut[-1] in _JOINERS or unicodedata.combining(cut[-1])):
        cut = cut[:-1]
    return cut


def _visible(text: str) -> bool:
    return any(not unicodedata.category(c).startswith(("Z", "C", "M")) for c in text)


def defuse_text(text: str) -> str:
    """Keep the user's words but stop lines from posing as a different speaker.

    Every Unicode line break becomes "\n" (a model may read U+2028 or a form feed as a new
    line just as well), then any line that starts like a speaker prefix, ASCII or a
    look-alike, is marked `(quoted)`. The line is matched in its NFKC form (what a reader
    takes ﹇Alice﹈ for) but kept as written.
    """
    text = _LINE_BREAKS.sub("\n", text)
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + " …(message cut: too long)"
    return quote_speakers(text)


def quote_speakers(text: str) -> str:
    """Every Unicode line break as "\n" and every speaker-like line marked `(quoted)`, at
    any length: the rule `defuse_text` applies to a message and core/outside.py to
    outside text."""
    text = _LINE_BREAKS.sub("\n", text)
    return "\n".join(_quote_line(line) for line in text.split("\n"))


def _quote_line(line: str) -> str:
    lead = _LEAD.match(line)
    start = lead.end() if lead is not None else 0
    head = unicodedata.normalize("NFKC", line[start : start + _PREFIX_WINDOW])
    if not _SPEAKER_PREFIX.match(head):
        return line
    return f"{line[:start]}(quoted) {line[start:]}"


def inject(
    sender_name: str,
    sender_id: str,
    text: str,
    image_notes: list[str],
    suffix: str = "",
    notes: Sequence[str] = (),
    first_image: int = 1,
) -> str:
    """`[name]: text` then `(Image N: description)` lines, then `notes` (already-formed
    `(Link N: ...)`, `(Document N: ...)`, `(Voice: ...)` lines), then an optional suffix.
    Images are numbered from `first_image` (a burst numbers them across its messages)."""
    name = clean_name(sender_name, fallback=sender_id)
    body = f"[{name}]: {defuse_text(text).strip()}".rstrip()
    for index, note in enumerate(image_notes, start=first_image):
        body += f"\n(Image {index}: {note})"
    for note in notes:
        body += f"\n{note}"
    if suffix:
        body += f"\n{suffix}"
    return body
