"""Typed conversation chunks rendered as XML-tagged chat messages within an exact budget.

Each kind of chunk is its own tag with escaped attributes, so user-supplied text can
never pose as another kind. Under the budget, system chunks are kept and the newest
conversation chunks win; every chunk is reported as included or excluded.

The build walks newest-first and stops when the budget is full, so its cost is what the
kept chunks cost. A rendered chunk is "<tag attrs> \\n" + body + " \\n</tag>": with a
regex-pretokenizing BPE the space before each newline forces token boundaries, so its
count is count(head) + count(body) + count(tail) exactly and the body count can come
from storage (`Chunk.tokens`). This is team9's seed-shaped builder; the daemon does not
use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any

from core.context.assembler import ContextOverflowError
from core.context.budget import framing_tokens, oldest_to_drop, resolve_counter
from core.context.chunk_render import ChunkRenderer, XmlChunkRenderer
from core.context.chunk_types import (
    PINNED_TYPES,
    ROLES,
    Chunk,
    ChunkType,
    ContextBuildResult,
    IdRanges,
)
from core.text.tokens import REPLY_PRIMER_TOKENS, TokenCounter, count_messages, get_counter

MESSAGE_SEPARATOR = "\n\n"

__all__ = ["MESSAGE_SEPARATOR", "ChunkContextBuilder"]


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


class ChunkContextBuilder:
    """Builds OpenAI chat messages from chunks within `max_tokens` (count_messages).

    Keep one builder per process: it remembers rendered chunks (an LRU of
    `render_cache_size` entries keyed by chunk identity; chunks are immutable), so a
    turn's build only renders the chunks it has not seen before.
    """

    def __init__(
        self, tokenizer: TokenCounter | str | None = None, *, render_cache_size: int = 32768
    ) -> None:
        self._tokenizer = resolve_counter(tokenizer, "tokenizer") if tokenizer is not None else None
        self._default = XmlChunkRenderer()
        self._renderers: list[ChunkRenderer] = []
        # Heads ("<tag id=..>") and tails repeat across builds: count them once.
        self._short: Callable[..., int] = lru_cache(maxsize=65536)(_count_with)
        self._framing: Callable[..., int] = lru_cache(maxsize=256)(framing_tokens)
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
        counter = (
            resolve_counter(tokenizer, "tokenizer") if tokenizer is not None else self._tokenizer
        )
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
            base += self._frame(counter, "system") + sp
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

    def _frame(self, counter: TokenCounter, role: str) -> int:
        try:
            return self._framing(role, counter)
        except TypeError:  # an unhashable custom counter
            return framing_tokens(role, counter)

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
                stored = chunk.tokens is not None and body == chunk.text
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
        framing = self._frame(counter, role)
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
        n_drop = oldest_to_drop((kept[n].r.sep_tokens for n in droppable), total - max_tokens)
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
