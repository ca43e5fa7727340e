"""One turn's citation numbers, shared by the context's passages and the `knowledge` tool.

Why: the context shows passages as [1]..[n] and tells the model to cite by number. A
tool call that numbered its passages from [1] again would give two passages the same
number in one turn, and a reply's "[1]" would not say which one it means. So within a
turn a passage keeps the number it was first shown with, and a new passage gets the next
number after the highest used so far.

Why an object passed along: the numbering belongs to one turn. It lives in that turn's
`ToolContext.extra`, so no other turn, chat or user ever sees it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.context.report import KnowledgeNote

CITATIONS_KEY = "citations"  # ToolContext.extra key: the turn's Citations
_NUMBERED = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


class Citations:
    """Passage key (a chunk id) -> the citation number it was shown with in this turn."""

    def __init__(self, numbers: Iterable[tuple[int, int]] = (), *, after: int = 0) -> None:
        """`numbers`: passages already shown with their numbers; `after`: numbers up to
        this one are taken even if no known passage holds them."""
        self._numbers = dict(numbers)
        self._last = max([after, *self._numbers.values()])

    @classmethod
    def after(cls, note: KnowledgeNote | None) -> Citations:
        """A turn's numbering, continuing from what its context showed. A note that does
        not say which passage has which number (another lookup) still reserves every
        number its text shows, so the tool's first new passage comes after them."""
        if note is None:
            return cls()
        if note.numbers:
            return cls(note.numbers)
        return cls.continuing([note.text])

    @classmethod
    def continuing(cls, shown: Iterable[str]) -> Citations:
        """A numbering after every `[n] ` line of `shown`: a resumed background task goes
        on after the numbers its earlier steps' observations used."""
        return cls(after=max((int(n) for t in shown for n in _NUMBERED.findall(t)), default=0))

    @classmethod
    def of(cls, extra: Mapping[str, Any]) -> Citations:
        """The turn's (or background task's) numbering from a tool context's `extra`; a
        fresh one for a context made elsewhere (`/tools`), where each call starts at [1]."""
        found = extra.get(CITATIONS_KEY)
        return found if isinstance(found, Citations) else cls()

    def peek(self, key: int) -> int:
        """The number `key` has, or would get if it were shown now (nothing is kept)."""
        return self._numbers.get(key, self._last + 1)

    def cite(self, key: int) -> int:
        """`key` is shown: its number, the same for the rest of the turn."""
        number = self._numbers.get(key)
        if number is None:
            number = self._last = self._last + 1
            self._numbers[key] = number
        return number

    @property
    def last(self) -> int:
        """The highest number used so far (0: none)."""
        return self._last

    @property
    def numbers(self) -> tuple[tuple[int, int], ...]:
        """(key, number) for every passage shown so far, in the order they were shown."""
        return tuple(self._numbers.items())
