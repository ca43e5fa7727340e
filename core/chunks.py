"""Typed conversation chunks rendered as XML-tagged chat messages within an exact budget.

Why: conversation state is more than user/assistant turns (tool calls and results,
sub-agents, progress summaries). Each kind is rendered as its own tag, with the chunk id
and metadata as escaped attributes, so the model can tell them apart and user-supplied
text can never pose as another kind: anything in a chunk that looks like one of our tags
is neutralised. Under the budget, system chunks are kept and the newest conversation
chunks win; every chunk is reported as included or excluded.

Speed: the build walks the history newest-first and stops when the budget is full, so a
100,000-chunk history costs what the kept chunks cost. Rendered chunks are
"<tag attrs> \\n" + body + " \\n</tag>": with a regex-pretokenizing BPE the space before
each newline forces token boundaries on both sides of the body, so a chunk's count is
count(head) + count(body) + count(tail) exactly, and the body count can come from
storage (`Chunk.tokens`) instead of re-tokenizing old turns.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from functools import lru_cache
from itertools import accumulate
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Protocol, overload, runtime_checkable

from core.assembler import ContextOverflowError
from core.tokens import (
    REPLY_PRIMER_TOKENS,
    TOKENS_PER_MESSAGE,
    TokenCounter,
    count_messages,
    get_counter,
)

MESSAGE_SEPARATOR = "\n\n"
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

# Every default tag and the role its message takes unless the chunk names one.
TAG_ROLES: Mapping[str, str] = MappingProxyType(
    {
        "system_context": "system",
        "user_message": "user",
        "assistant_response": "assistant",
        "assistant_clarification": "assistant",
        "tool_call": "assistant",
        "skill_call": "assistant",
        "tool_result": "user",
        "skill_result": "user",
        "spawn_subagent": "assistant",
        "message_to_subagent": "assistant",
        "subagent_result": "user",
        "parent_agent_message": "user",
        "progress_summary": "system",
        "todo_update": "assistant",
        "thinking": "assistant",
        "user_intervention": "user",
        "task_completed": "assistant",
        "task_abandoned": "assistant",
        "task_terminated": "assistant",
    }
)
DEFAULT_TAGS = frozenset(TAG_ROLES)
_RESULT_TAGS = frozenset({"tool_result", "skill_result", "subagent_result"})
# The tag of a chunk without `subtype`: (type, role) -> tag, then (type, None) -> tag.
_TYPE_TAGS: Mapping[tuple[ChunkType, str | None], str] = MappingProxyType(
    {
        (ChunkType.SYSTEM, None): "system_context",
        (ChunkType.ENVIRONMENT, None): "system_context",
        (ChunkType.AGENT, "user"): "user_message",
        (ChunkType.AGENT, None): "assistant_response",
        (ChunkType.WORKFLOW, "user"): "tool_result",
        (ChunkType.WORKFLOW, None): "tool_call",
        (ChunkType.DELEGATION, "user"): "subagent_result",
        (ChunkType.DELEGATION, None): "spawn_subagent",
        (ChunkType.WORKING_FLOW, None): "progress_summary",
        (ChunkType.OUTPUT, None): "task_completed",
    }
)


@dataclass(frozen=True, slots=True, eq=False)
class Chunk:
    """One piece of conversation state; immutable, compared by identity.

    `subtype` picks the tag (one of TAG_ROLES, or anything a registered renderer knows);
    `tokens` is the stored token count of `content` under the builder's tokenizer, used
    instead of re-tokenizing when the content is rendered unchanged.
    """

    id: str | int
    type: ChunkType
    content: str
    role: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    _: KW_ONLY
    subtype: str | None = None
    tokens: int | None = None

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
        if not isinstance(self.content, str):
            raise TypeError(f"chunk {self.id!r}: content must be str")
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


@runtime_checkable
class ChunkRenderer(Protocol):
    """Renders chunks it can handle; registered renderers are asked before the defaults."""

    def can_render(self, chunk: Chunk) -> bool: ...

    def get_role(self, chunk: Chunk) -> str: ...

    def render(self, chunk: Chunk) -> str: ...


# -- escaping -------------------------------------------------------------------------

_INVISIBLE = "\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
_OPENERS = "<\uff1c\ufe64"
_TAG_LIKE = re.compile(
    rf"[{_OPENERS}]([\s{_INVISIBLE}/\uff0f\\]*)([^\s>\uff1e/\uff0f{_OPENERS}]{{1,96}})"
)
_STRIP_INVISIBLE = re.compile(rf"[{_INVISIBLE}]")
_ATTR_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def _attr_table() -> Mapping[int, str]:
    escapes = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
    escapes |= {"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}
    escapes |= {chr(c): "\ufffd" for c in range(32) if chr(c) not in "\n\r\t"}
    return MappingProxyType(str.maketrans(escapes))


_ATTR_TABLE = _attr_table()


def neutralize_tags(text: str, tags: Iterable[str] = DEFAULT_TAGS) -> str:
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


def escape_attr(value: str) -> str:
    """Escape an attribute value for a double-quoted XML attribute (one line, no markup)."""
    return value.translate(_ATTR_TABLE)


def _attr_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return escape_attr(str(value))
    return escape_attr(json.dumps(value, ensure_ascii=False, default=str, sort_keys=True))


def _attr_name(key: Any) -> str | None:
    name = _ATTR_NAME_BAD.sub("_", str(key))
    if not name:
        return None
    return name if (name[0].isalpha() or name[0] == "_") else "_" + name


class XmlChunkRenderer:
    """The default renderer: `<tag id=".." k="v"> \\nbody \\n</tag>` for every chunk."""

    def __init__(self, extra_tags: Iterable[str] = ()) -> None:
        self.tags = DEFAULT_TAGS | frozenset(extra_tags)

    def can_render(self, chunk: Chunk) -> bool:
        return chunk.subtype is None or chunk.subtype in TAG_ROLES

    def tag_for(self, chunk: Chunk) -> str:
        if chunk.subtype is not None:
            if chunk.subtype not in TAG_ROLES:
                raise ValueError(
                    f"chunk {chunk.id!r}: unknown subtype {chunk.subtype!r}; register a "
                    f"renderer for it or use one of {sorted(TAG_ROLES)}"
                )
            return chunk.subtype
        return _TYPE_TAGS.get((chunk.type, chunk.role)) or _TYPE_TAGS[(chunk.type, None)]

    def get_role(self, chunk: Chunk) -> str:
        return chunk.role or TAG_ROLES[self.tag_for(chunk)]

    def open_tag(self, chunk: Chunk, tag: str) -> str:
        attrs = [f'id="{escape_attr(str(chunk.id))}"']
        meta = chunk.metadata
        if tag in _RESULT_TAGS and "success" in meta:
            ok = bool(meta["success"])
            attrs.append(f'success="{"true" if ok else "false"}"')
            if not ok and "error" not in meta:
                attrs.append('error="true"')
        for key, value in meta.items():
            if key == "id" or (key == "success" and tag in _RESULT_TAGS):
                continue  # the chunk id wins; success was written above
            name, text = _attr_name(key), _attr_text(value)
            if name is not None and text is not None:
                attrs.append(f'{name}="{text}"')
        return f"<{tag} {' '.join(attrs)}>"

    def parts(self, chunk: Chunk) -> tuple[str, str, str]:
        """(head, body, tail); body is stripped and neutralised, empty for empty chunks."""
        tag = self.tag_for(chunk)
        body = neutralize_tags(chunk.content.strip(), self.tags)
        opening = self.open_tag(chunk, tag)
        if not body:
            return opening, "", f"</{tag}>"
        return opening + " \n", body, f" \n</{tag}>"

    def render(self, chunk: Chunk) -> str:
        return "".join(self.parts(chunk))


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
    scanning, and a build costs the same at 100,000 chunks as at 1,000.
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


# -- building ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rendered:
    """A chunk as it appears in a message, with its exact token shares."""

    role: str
    text: str
    tokens: int  # count(text)
    sep_tokens: int  # count(text + separator): its share when a newer chunk follows
    standalone: int  # its cost as the last chunk of a message, framing included
    additive: bool  # its count can be summed with its neighbours' (forced boundaries)


@dataclass(slots=True)
class _Item:
    index: int
    chunk: Chunk
    r: _Rendered


def _count_with(counter: TokenCounter, text: str) -> int:
    return counter.count(text)


def _resolve(tokenizer: TokenCounter | str | None) -> TokenCounter:
    if tokenizer is None or isinstance(tokenizer, str):
        return get_counter(tokenizer)
    if not callable(getattr(tokenizer, "count", None)):
        raise TypeError(f"tokenizer must be a TokenCounter or a name, not {tokenizer!r}")
    return tokenizer


class ChunkContextBuilder:
    """Builds OpenAI chat messages from chunks within `max_tokens` (count_messages).

    Keep one builder per process: it remembers rendered chunks (an LRU of
    `render_cache_size` entries keyed by chunk identity; chunks are immutable), so a
    turn's build only renders the chunks it has not seen before.
    """

    def __init__(
        self, tokenizer: TokenCounter | str | None = None, *, render_cache_size: int = 32768
    ) -> None:
        self._tokenizer = _resolve(tokenizer) if tokenizer is not None else None
        self._default = XmlChunkRenderer()
        self._renderers: list[ChunkRenderer] = []
        # Heads ("<tag id=..>"), tails and roles repeat across builds: count them once.
        self._short: Callable[..., int] = lru_cache(maxsize=65536)(_count_with)
        self._rendered: Callable[..., _Rendered | None] = lru_cache(maxsize=render_cache_size)(
            self._render
        )

    def register_renderer(self, renderer: ChunkRenderer) -> None:
        """Add a renderer; the most recently registered one that can_render a chunk wins."""
        for method in ("can_render", "get_role", "render"):
            if not callable(getattr(renderer, method, None)):
                raise TypeError(f"renderer {renderer!r} has no {method}()")
        self._renderers.insert(0, renderer)
        self._rendered.cache_clear()  # type: ignore[attr-defined]

    def build(
        self,
        chunks: Sequence[Chunk],
        max_tokens: int,
        system_prompt: str | None = None,
        tokenizer: TokenCounter | str | None = None,
        include_system: bool = True,
        include_environment: bool = True,
        exclude_types: Iterable[ChunkType | str] = (),
        include_only_chunk_ids: Iterable[Any] | None = None,
        *,
        system_prompt_tokens: int | None = None,
    ) -> ContextBuildResult:
        """Fit chunks into `max_tokens`: pinned chunks kept, newest conversation first.

        The system prompt is its own first message. `system_prompt_tokens` may pass its
        known exact count (the assembler's total_tokens) so it is not tokenized again.
        Raises ContextOverflowError if the system prompt and pinned chunks alone do not fit.
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int, not {max_tokens!r}")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt must be str, not {type(system_prompt).__name__}")
        if system_prompt_tokens is not None and (
            not isinstance(system_prompt_tokens, int) or system_prompt_tokens < 0
        ):
            raise ValueError("system_prompt_tokens must be a non-negative int")
        counter = _resolve(tokenizer) if tokenizer is not None else self._tokenizer
        if counter is None:
            counter = self._tokenizer = get_counter()
        blocked = {ChunkType(t) for t in exclude_types}
        if not include_system:
            blocked.add(ChunkType.SYSTEM)
        if not include_environment:
            blocked.add(ChunkType.ENVIRONMENT)
        only = None if include_only_chunk_ids is None else set(include_only_chunk_ids)

        def item_at(i: int) -> _Item | None:
            """The rendered chunk at i, or None if it is filtered out or renders empty."""
            chunk = chunks[i]
            if not isinstance(chunk, Chunk):
                raise TypeError(f"chunks must be Chunk objects, not {type(chunk).__name__}")
            if chunk.type in blocked or (only is not None and chunk.id not in only):
                return None
            rendered = self._rendered(chunk, counter)
            return None if rendered is None else _Item(i, chunk, rendered)

        prompt = system_prompt if system_prompt and system_prompt.strip() else None
        base = REPLY_PRIMER_TOKENS
        if prompt is not None:
            sp = system_prompt_tokens if system_prompt_tokens is not None else counter.count(prompt)
            base += TOKENS_PER_MESSAGE + self._cnt(counter, "system") + sp
        pins = [it for i in self._pinned_indices(chunks) if (it := item_at(i)) is not None]
        block = _block_costs(pins)
        additive = getattr(counter, "pretokenized", False)
        required = base + block[-1]
        offset = 0  # non-additive counters: how far the sum of parts overstates the whole
        if required > max_tokens and not (additive and all(p.r.additive for p in pins)):
            offset = min(0, count_messages(_messages(prompt, pins), counter) - required)
        if required + offset > max_tokens:
            named = [("system_prompt", base - REPLY_PRIMER_TOKENS)] if prompt else []
            named += [(f"chunk {p.chunk.id!r}", p.r.standalone) for p in pins]
            raise ContextOverflowError(named, required + offset, max_tokens)

        def junction(k: int, role: str | None) -> int:
            """Cost of the first k pins laid out before a message of `role`."""
            if k and pins[k - 1].r.role == role:
                last = pins[k - 1].r
                return block[k] - last.standalone + last.sep_tokens
            return block[k]

        kept: list[_Item] = []  # newest first
        skipped: list[int] = []  # walked but excluded, newest first
        k, suffix, oldest_role, stop = len(pins), 0, None, -1
        for i in range(len(chunks) - 1, -1, -1):
            is_pin = bool(k) and pins[k - 1].index == i
            if is_pin:
                k -= 1
                item: _Item | None = pins[k]
            elif (item := item_at(i)) is None:
                skipped.append(i)
                continue
            r = item.r  # type: ignore[union-attr]
            add = r.sep_tokens if r.role == oldest_role else r.standalone
            # A pin moving from the block into the suffix keeps the same layout (never over).
            if not is_pin and base + offset + junction(k, r.role) + suffix + add > max_tokens:
                stop = i
                break
            suffix += add
            oldest_role = r.role
            kept.append(item)  # type: ignore[arg-type]
        kept.extend(reversed(pins[:k]))
        kept.reverse()

        messages = _messages(prompt, kept)
        if additive and all(it.r.additive for it in kept):
            total = base + _content_total(kept)
        else:
            pinned_idx = {p.index for p in pins}
            total, trimmed = _recount_and_trim(counter, prompt, kept, max_tokens, pinned_idx)
            if len(trimmed) != len(kept):
                left = {it.index for it in trimmed}
                skipped += [it.index for it in kept if it.index not in left]
                kept, messages = trimmed, _messages(prompt, trimmed)
        excluded = _ranges_of(stop, [p.index for p in pins[:k]], skipped)
        return ContextBuildResult(
            messages=messages,
            token_count=total,
            token_count_exact=bool(counter.exact),
            included_chunk_ids=[it.chunk.id for it in kept],
            excluded_chunk_ids=IdRanges(chunks, excluded),
        )

    # -- helpers ----------------------------------------------------------------------

    def _cnt(self, counter: TokenCounter, text: str) -> int:
        try:
            return self._short(counter, text)
        except TypeError:  # an unhashable custom counter
            return counter.count(text)

    @staticmethod
    def _pinned_indices(chunks: Sequence[Chunk]) -> list[int]:
        indexed = getattr(chunks, "pinned_indices", None)
        if callable(indexed):
            return sorted(indexed())
        try:
            types = list(map(attrgetter("type"), chunks))
        except AttributeError:
            raise TypeError("chunks must be Chunk objects") from None
        if not any(t in types for t in PINNED_TYPES):
            return []
        return [i for i, t in enumerate(types) if t in PINNED_TYPES]

    def _render(self, chunk: Chunk, counter: TokenCounter) -> _Rendered | None:
        renderer = next((r for r in self._renderers if r.can_render(chunk)), self._default)
        if renderer is self._default:
            head, body, tail = self._default.parts(chunk)
            role = self._default.get_role(chunk)
            if not body:
                text = head + tail
                tokens, sep = self._cnt(counter, text), self._cnt(counter, text + MESSAGE_SEPARATOR)
            else:
                # The stored count is of `content`; usable only if it is rendered unchanged.
                stored = chunk.tokens is not None and body == chunk.content
                body_tokens = chunk.tokens if stored else counter.count(body)
                h, t = self._cnt(counter, head), self._cnt(counter, tail)
                t_sep = self._cnt(counter, tail + MESSAGE_SEPARATOR)
                tokens, sep = h + body_tokens + t, h + body_tokens + t_sep  # type: ignore[operator]
                text = head + body + tail
            additive = True
        else:
            role = renderer.get_role(chunk)
            if role not in ROLES:
                raise ValueError(f"renderer {renderer!r} gave role {role!r} for chunk {chunk.id!r}")
            text = renderer.render(chunk)
            if not isinstance(text, str):
                raise TypeError(f"renderer {renderer!r} returned {type(text).__name__}, not str")
            if not text:
                return None
            tokens = counter.count(text)
            sep = counter.count(text + MESSAGE_SEPARATOR)
            additive = not text[0].isspace() and text[0] != "/" and not text[-1].isspace()
        framing = TOKENS_PER_MESSAGE + self._cnt(counter, role)
        return _Rendered(role, text, tokens, sep, framing + tokens, additive)


def _block_costs(pins: list[_Item]) -> list[int]:
    """costs[k]: tokens of the first k pins alone, same-role neighbours merged."""
    costs = [0]
    for k, item in enumerate(pins):
        cost = costs[-1] + item.r.standalone
        if k and pins[k - 1].r.role == item.r.role:  # the previous pin merges into this one
            cost += pins[k - 1].r.sep_tokens - pins[k - 1].r.standalone
        costs.append(cost)
    return costs


def _messages(prompt: str | None, kept: list[_Item]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if prompt is not None:
        messages.append({"role": "system", "content": prompt})
    role: str | None = None
    texts: list[str] = []
    for item in kept:
        if item.r.role != role and texts:
            messages.append({"role": role, "content": MESSAGE_SEPARATOR.join(texts)})
            texts = []
        role = item.r.role
        texts.append(item.r.text)
    if texts:
        messages.append({"role": role, "content": MESSAGE_SEPARATOR.join(texts)})
    return messages


def _content_total(kept: list[_Item]) -> int:
    """Exact tokens of the chunk messages from per-chunk counts (kept is chronological)."""
    total = 0
    last = len(kept) - 1
    for n, item in enumerate(kept):
        if n == last or kept[n + 1].r.role != item.r.role:
            total += item.r.standalone
        else:
            total += item.r.sep_tokens
    return total


def _recount_and_trim(
    counter: TokenCounter, prompt: str | None, kept: list[_Item], max_tokens: int, pinned: set[int]
) -> tuple[int, list[_Item]]:
    """For counters whose parts do not add up: count the messages, drop oldest if over."""
    total = count_messages(_messages(prompt, kept), counter)
    while total > max_tokens:
        droppable = [n for n, it in enumerate(kept) if it.index not in pinned]
        if not droppable:
            raise ContextOverflowError([("pinned chunks", total)], total, max_tokens)
        over, n_drop = total - max_tokens, 0
        for n in droppable:
            n_drop += 1
            over -= kept[n].r.sep_tokens
            if over <= 0:
                break
        gone = set(droppable[:n_drop])
        kept = [it for n, it in enumerate(kept) if n not in gone]
        total = count_messages(_messages(prompt, kept), counter)
    return total, kept


def _ranges_of(stop: int, holes: list[int], singles: list[int]) -> list[tuple[int, int]]:
    """Index ranges: [0, stop] minus `holes` (ascending), plus `singles` (any order)."""
    ranges: list[tuple[int, int]] = []
    start = 0
    for hole in holes:
        ranges.append((start, hole))
        start = hole + 1
    if stop >= 0:
        ranges.append((start, stop + 1))
    ranges = [(a, b) for a, b in ranges if b > a]
    for i in sorted(singles):
        if ranges and ranges[-1][1] == i:
            ranges[-1] = (ranges[-1][0], i + 1)
        else:
            ranges.append((i, i + 1))
    return ranges
