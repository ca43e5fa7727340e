"""The chunk data types: what a chunk build takes and what it gives back.

Plain validated values that depend on neither rendering nor token counting.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from itertools import accumulate
from types import MappingProxyType
from typing import Any, overload

ROLES = ("system", "user", "assistant")


class ChunkType(StrEnum):
    SYSTEM = "system"
    AGENT = "agent"
    WORKFLOW = "workflow"
    DELEGATION = "delegation"
    ENVIRONMENT = "environment"
    WORKING_FLOW = "working_flow"
    OUTPUT = "output"


PINNED_TYPES = frozenset({ChunkType.SYSTEM, ChunkType.ENVIRONMENT})


@dataclass(frozen=True, slots=True, eq=False)
class Chunk:
    """One piece of conversation state; immutable, compared by identity.

    `content` is text or any JSON value (a tool call's arguments, a result object): `text`
    is what the default renderer shows, the string itself or the value as compact JSON
    (non-ASCII kept), fixed when the chunk is made. A registered renderer gets the chunk
    and so the original value. `subtype` picks the tag (one of TAG_ROLES, or anything a
    registered renderer knows); `tokens` is the stored token count of `text` under the
    builder's tokenizer, used instead of re-tokenizing when it is rendered unchanged.
    """

    id: str | int
    type: ChunkType
    content: Any
    role: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    _: KW_ONLY
    subtype: str | None = None
    tokens: int | None = None
    text: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, str | int) or self.id == "":
            raise ValueError(f"chunk id must be a non-empty str or an int, not {self.id!r}")
        if not isinstance(self.type, ChunkType):
            try:
                object.__setattr__(self, "type", ChunkType(self.type))
            except ValueError:
                valid = ", ".join(t.value for t in ChunkType)
                raise ValueError(
                    f"chunk {self.id!r}: unknown type {self.type!r} (valid: {valid})"
                ) from None
        object.__setattr__(self, "text", _content_text(self.id, self.content))
        if self.role is not None and self.role not in ROLES:
            raise ValueError(f"chunk {self.id!r}: role must be one of {ROLES} or None")
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"chunk {self.id!r}: metadata must be a mapping")
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        if self.subtype is not None and not isinstance(self.subtype, str):
            raise TypeError(f"chunk {self.id!r}: subtype must be str or None")
        if self.tokens is not None and (
            isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0
        ):
            raise ValueError(f"chunk {self.id!r}: tokens must be a non-negative int or None")


def _content_text(chunk_id: str | int, content: Any) -> str:
    """The content as text: a string as it is, any other JSON value as compact JSON."""
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:  # a set, bytes, an object; NaN or infinity
        raise TypeError(
            f"chunk {chunk_id!r}: content must be text or a JSON value "
            f"(dict, list, number, bool, None), not {type(content).__name__}: {exc}"
        ) from None


# -- results ----------------------------------------------------------------------------


class IdRanges(Sequence[Any]):
    """Ids of chunks given as ascending index ranges of the input: O(ranges) memory.

    Behaves as a read-only sequence of ids (len, index, iterate, compare with a list);
    `ranges()` gives the compact form (first id, last id, count) for reports.
    """

    def __init__(self, chunks: Sequence[Chunk], ranges: Sequence[tuple[int, int]]) -> None:
        self._chunks = chunks
        self._ranges = tuple((a, b) for a, b in ranges if b > a)
        self._ends = list(accumulate(b - a for a, b in self._ranges))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("IdRanges index out of range")
        k = bisect.bisect_right(self._ends, index)
        start = self._ranges[k][0]
        offset = index - (self._ends[k - 1] if k else 0)
        return self._chunks[start + offset].id

    def __iter__(self) -> Iterator[Any]:
        for a, b in self._ranges:
            for i in range(a, b):
                yield self._chunks[i].id

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdRanges | list | tuple):
            return len(self) == len(other) and all(x == y for x, y in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def ranges(self) -> list[tuple[Any, Any, int]]:
        return [(self._chunks[a].id, self._chunks[b - 1].id, b - a) for a, b in self._ranges]

    def __repr__(self) -> str:
        parts = [f"{f}..{la} ({n})" if n > 1 else repr(f) for f, la, n in self.ranges()]
        return f"IdRanges([{', '.join(parts)}])"


@dataclass(frozen=True)
class ContextBuildResult:
    messages: list[dict[str, Any]]
    token_count: int
    token_count_exact: bool
    included_chunk_ids: list[Any]
    excluded_chunk_ids: Sequence[Any]


class ChunkLog(Sequence[Chunk]):
    """An append-only chunk history that indexes its pinned (system/environment) chunks.

    Pass one to `build` for long histories: the builder then finds pinned chunks without
    scanning, so a build's cost does not grow with the history.
    """

    def __init__(self, chunks: Iterable[Chunk] = ()) -> None:
        self._items: list[Chunk] = []
        self._pinned: list[int] = []
        self.extend(chunks)

    def append(self, chunk: Chunk) -> None:
        if not isinstance(chunk, Chunk):
            raise TypeError(f"ChunkLog holds Chunk objects, not {type(chunk).__name__}")
        if chunk.type in PINNED_TYPES:
            self._pinned.append(len(self._items))
        self._items.append(chunk)

    def extend(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            self.append(chunk)

    def pinned_indices(self) -> Sequence[int]:
        return tuple(self._pinned)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...
    @overload
    def __getitem__(self, index: slice) -> list[Chunk]: ...
    def __getitem__(self, index: int | slice) -> Chunk | list[Chunk]:
        return self._items[index]
