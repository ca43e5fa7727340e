"""Channel-layer injection: who said it and what their pictures show, as plain data.

Why: in a group the model must know who is speaking, but a nickname or a message must
never be able to impersonate another speaker, the system, or a tag. Names are cleaned
and bracket-free; a line in the text that looks like a speaker prefix is defused.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_CHARS = 64
MAX_TEXT_CHARS = 16_000

# A line beginning like "[Alice]: ..." would read as another speaker's turn.
_SPEAKER_PREFIX = re.compile(r"^(\s*)\[([^\]\n]{0,80})\]\s*:", re.MULTILINE)
_BIDI_AND_CONTROL = {"Cc", "Cf", "Zl", "Zp"}


def clean_name(name: str, fallback: str) -> str:
    """Display name without control/bidi characters, brackets or newlines, capped."""
    kept = "".join(
        " " if ch in "\r\n\t" else ch
        for ch in name
        if unicodedata.category(ch) not in _BIDI_AND_CONTROL or ch in "\r\n\t"
    )
    kept = kept.replace("[", "(").replace("]", ")")
    kept = " ".join(kept.split())[:MAX_NAME_CHARS].strip()
    return kept or fallback


def defuse_text(text: str) -> str:
    """Keep the user's words but stop lines from posing as a different speaker."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + " …(message cut: too long)"
    return _SPEAKER_PREFIX.sub(lambda m: f"{m.group(1)}(quoted) [{m.group(2)}]:", text)


def inject(
    sender_name: str, sender_id: str, text: str, image_notes: list[str], suffix: str = ""
) -> str:
    """`[name]: text` then `(Image N: description)` lines, then an optional suffix."""
    name = clean_name(sender_name, fallback=sender_id)
    body = f"[{name}]: {defuse_text(text).strip()}".rstrip()
    for index, note in enumerate(image_notes, start=1):
        body += f"\n(Image {index}: {note})"
    if suffix:
        body += f"\n{suffix}"
    return body
