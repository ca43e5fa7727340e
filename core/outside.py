"""The one door for outside text: everything the model reads that neither the sender nor
the operator wrote (a page's text and title, a document, a transcript, a tool's or an MCP
server's result) passes through `outside_text` before it is put in a prompt.

Why one function: such text may try to talk to the model (a forged `[Alice]:` line, a
`<system>` tag in any bracket form, a `[Remember: ...]` marker), and every caller must
apply every rule. The words stay readable; the tricks become plain text. Markers are
defused by the tool registry (only it knows them), passed in as `defuse`.
"""

from __future__ import annotations

from collections.abc import Callable

from core.inject import quote_speakers
from core.text.escaping import escape_text

Defuse = Callable[[str], str]
# Look-alike angle brackets (full-width, small): escaped like the ASCII ones, so a
# `＜system＞` cannot pose as a tag either.
_ANGLES = str.maketrans({"\uff1c": "&lt;", "\ufe64": "&lt;", "\uff1e": "&gt;", "\ufe65": "&gt;"})
# In a `(Link N: ...)` note: full-width parentheses, so the text cannot close the note.
_PARENS = str.maketrans({"(": "\uff08", ")": "\uff09"})


def outside_text(text: str, defuse: Defuse | None = None, *, in_note: bool = False) -> str:
    """`text` made safe to put in a prompt: every line break a newline, speaker-like lines
    `(quoted)`, markers defused (`defuse`), `&`, `<`, `>` and their look-alikes escaped;
    `in_note`: also no ASCII parentheses (the text sits inside `(Link N: ...)`)."""
    text = quote_speakers(text)
    if defuse is not None:
        text = defuse(text)
    if in_note:
        text = text.translate(_PARENS)
    return escape_text(text).translate(_ANGLES)
