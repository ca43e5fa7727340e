"""Markdown that is still being written, closed so a preview of it renders cleanly.

Why: a streamed preview is rendered many times while the model writes. Half of an
answer often holds an opened `**bold`, `` `code `` or `~~strike` whose closer has not
arrived yet; rendered as is, the markers would show as literal symbols until it does.
Closing what is open (and dropping a marker run at the very end, which may be an opener
with nothing after it yet) makes each preview look like the final message will.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)", re.MULTILINE)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_TRAILING_MARKS = re.compile(r"[*_~`]+$")


def close_open_marks(text: str) -> str:
    """`text` with its unclosed inline marks closed; an unclosed fence is left alone
    (Markdown already renders it as code to the end)."""
    fences = list(_FENCE.finditer(text))
    if len(fences) % 2 == 1:  # inside a code block: nothing inline to close
        return text
    prose_from = fences[-1].end() if fences else 0  # after the last closed block
    return text[:prose_from] + _close_inline(text[prose_from:])


def _close_inline(text: str) -> str:
    text = _TRAILING_MARKS.sub("", text)
    if text.count("`") % 2 == 1:
        text += "`"  # an open code span closes first: it is the innermost
    outside_code = _CODE_SPAN.sub("", text)
    closers = ""
    if outside_code.count("**") % 2 == 1:
        closers = "**" + closers
    if outside_code.count("~~") % 2 == 1:
        closers = "~~" + closers
    return text + closers
