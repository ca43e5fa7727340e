"""An answer that is one emoji is a reaction, not a message.

Why a rule in core: "👍" posted as a reply in a busy group is noise; on the message it
answers it is what a person would do. The model says so by answering with one emoji and
nothing else, or with `[React: 👍]` alone. The channel reacts where it can (Telegram
`setMessageReaction`, NapCat's `set_msg_emoji_like`) and otherwise sends the emoji as a
short message (core/turn/delivery.py), so the answer is never lost either way.
"""

from __future__ import annotations

import re
import unicodedata

_MARKER = re.compile(r"\A\s*\[React:\s*(?P<emoji>[^\]\s]{1,16})\s*\]\s*\Z", re.IGNORECASE)
# Parts of one emoji that are not emoji themselves: presentation selectors, skin tones,
# the keycap mark and tag characters (subdivision flags).
_MODIFIERS = frozenset({"\ufe0f", "\ufe0e", "\u20e3"} | {chr(c) for c in range(0x1F3FB, 0x1F400)})
_ZWJ = "\u200d"
MAX_EMOJI_CHARS = 16


def _symbol(char: str) -> bool:
    return unicodedata.category(char) == "So"


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def is_single_emoji(text: str) -> bool:
    """One emoji: a symbol with its modifiers, a ZWJ sequence of them, or a flag."""
    if not text or len(text) > MAX_EMOJI_CHARS:
        return False
    core = "".join(c for c in text if c not in _MODIFIERS and not 0xE0020 <= ord(c) <= 0xE007F)
    parts = core.split(_ZWJ)
    if len(parts) == 1 and len(core) == 2 and all(_regional(c) for c in core):
        return True  # a flag: two regional indicators
    return all(len(part) == 1 and _symbol(part) for part in parts)


def reaction_of(answer: str) -> str | None:
    """The emoji to react with when `answer` is one emoji (or `[React: …]`) alone."""
    found = _MARKER.match(answer)
    emoji = found.group("emoji") if found else answer.strip()
    return emoji if is_single_emoji(emoji) else None
