"""How untrusted text goes inside our tags: one attribute escaper, one tag neutraliser.

Chunk rendering, compaction's transcript and the tool loop's observation frames all put
untrusted text inside tags the model must be able to trust; each rule is kept once so
they cannot drift apart:

- `escape_attr`: a double-quoted attribute value on one line that cannot end its quotes
  (line breaks as character references, other control characters replaced).
- `neutralize_tags`: anything that a reader could take for one of the named tags
  (any case, look-alike brackets, zero-width characters) becomes plain text; other
  angle brackets stay, so `a < b` and `<b>` read as written.
- `escape_text`: every `&`, `<` and `>` escaped, for bodies that must hold no markup at
  all (a web page's text inside `<search_results>`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from types import MappingProxyType

_INVISIBLE = "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
_OPENERS = "<\uff1c\ufe64"
_TAG_LIKE = re.compile(
    rf"[{_OPENERS}]([\s{_INVISIBLE}/\uff0f\\]*)([^\s>\uff1e/\uff0f{_OPENERS}]{{1,96}})"
)
_STRIP_INVISIBLE = re.compile(rf"[{_INVISIBLE}]")


def _attr_table() -> Mapping[int, str]:
    escapes = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
    escapes |= {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
    # Other line breaks some readers honour, as references too: the value stays one line.
    escapes |= {"\x85": "&#133;", "\u2028": "&#8232;", "\u2029": "&#8233;"}
    escapes |= {chr(c): "\ufffd" for c in range(32) if chr(c) not in "\n\r\t"}
    return MappingProxyType(str.maketrans(escapes))


_ATTR_TABLE = _attr_table()


def escape_attr(value: str) -> str:
    """Escape a value for a double-quoted XML attribute (one line, no markup)."""
    return value.translate(_ATTR_TABLE)


def escape_text(text: str) -> str:
    """Escape &, <, > so untrusted text cannot close a wrapper or open any tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def neutralize_tags(text: str, tags: Iterable[str]) -> str:
    """Turn anything in `text` that a reader could take for one of `tags` into plain text.

    Catches opening and closing forms in any case, with attributes, whitespace, zero-width
    characters or full-width brackets; the opening bracket becomes "&lt;".
    """
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:
        return text
    names = tags if isinstance(tags, frozenset) else frozenset(tags)

    def fix(match: re.Match[str]) -> str:
        name = _STRIP_INVISIBLE.sub("", match.group(2))
        name = unicodedata.normalize("NFKC", name).casefold().replace("-", "_")
        for tag in names:
            rest = name[len(tag) : len(tag) + 1]
            if name.startswith(tag) and not (rest.isalnum() or rest == "_"):
                return "&lt;" + match.group(1) + match.group(2)
        return match.group(0)

    return _TAG_LIKE.sub(fix, text)
