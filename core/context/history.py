"""Fitting stored conversation history into a token budget, newest first.

Why this shape: a chat may hold 100,000 turns, but a turn's context needs only the newest
few hundred. The fitter accepts any `Sequence` and indexes it from the end, so its cost
depends on what it keeps, never on how long the history is; it trusts each item's STORED
token count (old turns are never re-tokenized) and counts only items that lack one. It
keeps a suffix of the history (no gaps: a conversation with holes reads as nonsense) and
never separates an assistant tool call from its tool results.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from core.context.tokens import REPLY_PRIMER_TOKENS, TokenCounter, message_tokens

HistoryId = int | str


@dataclass(slots=True)
class HistoryItem:
    """One stored message of the conversation, as the context engine needs it.

    Treat it as immutable; it is not frozen only because frozen dataclasses are about 3x
    slower to create, and views create one per history item they are asked for.

    `tokens` is the count of `content` alone (`counter.count(content)`, as storage keeps
    it); None means "unknown, count it now". Per-message overhead is added by the fitter.
    Items sharing a `group` (an assistant tool call and its tool results) are kept or
    dropped together. `tool_calls`, `tool_call_id` and `name` carry OpenAI tool messages.
    """

    id: HistoryId
    role: str
    content: str | list[dict[str, Any]]
    tokens: int | None = None
    group: str | None = None
    name: str | None = None
    tool_calls: tuple[dict[str, Any], ...] | None = None
    tool_call_id: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The OpenAI chat message for this item."""
        if self.name is None and self.tool_calls is None and self.tool_call_id is None:
            return {"role": self.role, "content": self.content}
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            message["name"] = self.name
        if self.tool_calls:
            message["tool_calls"] = [dict(call) for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message

    @property
    def plain(self) -> bool:
        """True when the message is just role + text (its overhead depends on role only)."""
        return (
            self.name is None
            and not self.tool_calls
            and self.tool_call_id is None
            and isinstance(self.content, str)
        )


class _LazyView(Sequence[HistoryItem]):
    """A read-only HistoryItem view over another sequence; items are made on access.

    Nothing is copied, so a 100,000-turn history costs only the items the fitter
    reaches. Subclasses say how one source element becomes an item (`_item`).
    """

    def __init__(self, source: Sequence[Any]) -> None:
        self._source = source

    def __len__(self) -> int:
        return len(self._source)

    @overload
    def __getitem__(self, index: int) -> HistoryItem: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[HistoryItem]: ...

    def __getitem__(self, index: int | slice) -> HistoryItem | Sequence[HistoryItem]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._source)
        return self._item(index)

    def __iter__(self) -> Iterator[HistoryItem]:
        for i in range(len(self)):
            yield self._item(i)

    def _item(self, index: int) -> HistoryItem:
        raise NotImplementedError


class DictHistory(_LazyView):
    """OpenAI message dicts (nanobot-style history lists) as HistoryItems.

    Ids are the list positions; `_tokens` in a dict, if present, is its stored count.
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(messages)

    def _item(self, index: int) -> HistoryItem:
        msg = self._source[index]
        calls = msg.get("tool_calls")
        return HistoryItem(
            id=index,
            role=str(msg.get("role", "user")),
            content=msg.get("content") or "",
            tokens=msg.get("_tokens"),
            name=msg.get("name"),
            tool_calls=tuple(calls) if calls else None,
            tool_call_id=msg.get("tool_call_id"),
        )


class TurnHistory(_LazyView):
    """Stored turns (`memory.types.Turn`), oldest first, as HistoryItems.

    Stored token counts are used as they are. Tool rounds are grouped by the id of their
    `tool_call` turn, so a call and its results are kept or dropped together; native
    tool calls (`meta.tool_calls`, `meta.tool_call_id`) become OpenAI tool messages.
    """

    def __init__(self, turns: Sequence[Any]) -> None:
        super().__init__(turns)
        self._turns = turns  # the same sequence, named for the fast paths below

    def _item(self, index: int) -> HistoryItem:
        turn = self._turns[index]
        kind = turn.kind
        if kind != "tool_call" and kind != "tool_result":
            return HistoryItem(turn.id, turn.role, turn.content, turn.token_count)
        meta = turn.meta or {}
        group = f"tools:{turn.id}" if kind == "tool_call" else self._caller_group(index)
        calls = meta.get("tool_calls") if turn.role == "assistant" else None
        return HistoryItem(
            id=turn.id,
            role=turn.role,
            content=turn.content,
            tokens=turn.token_count,
            group=group,
            tool_calls=tuple(calls) if calls else None,
            tool_call_id=meta.get("tool_call_id") if turn.role == "tool" else None,
        )

    def _caller_group(self, index: int) -> str | None:
        while index > 0:
            index -= 1
            turn = self._turns[index]
            if turn.kind == "tool_call":
                return f"tools:{turn.id}"
            if turn.kind != "tool_result":
                break
        return None  # results whose call is gone: kept alone (or, as `tool`, not at all)

    def plain_suffix(
        self, end: int, floor: int, total: int, budget: int, framing: Mapping[str, int]
    ) -> tuple[int, int, bool]:
        """Walk back from `end` over plain turns with stored counts while they fit.

        Returns (start, total, full): `full` when the budget stopped the walk; otherwise
        it stopped at `floor` or at a turn that needs the general path (a tool turn, a
        role whose framing is not known yet, no stored count).
        """
        turns = self._turns
        start = end
        while start > floor:
            turn = turns[start - 1]
            kind = turn.kind
            tokens = turn.token_count
            frame = framing.get(turn.role)
            if (
                kind == "tool_call"
                or kind == "tool_result"
                or frame is None
                or turn.role == "tool"
                or tokens is None
                or tokens < 0
                or turn.content.__class__ is not str
            ):
                return start, total, False
            if total + tokens + frame > budget:
                return start, total, True
            total += tokens + frame
            start -= 1
        return start, total, False

    def messages(self, start: int) -> list[dict[str, Any]]:
        """Turns start.. as chat messages (plain turns directly, tool turns via items)."""
        turns = self._turns
        out: list[dict[str, Any]] = []
        for index in range(start, len(turns)):
            turn = turns[index]
            if turn.kind != "tool_call" and turn.kind != "tool_result":
                out.append({"role": turn.role, "content": turn.content})
            else:
                out.append(self._item(index).to_message())
        return out

    def ids(self, start: int) -> list[HistoryId]:
        turns = self._turns
        return [turns[index].id for index in range(start, len(turns))]


class MessageCost:
    """Exact chat-format cost of history items: stored content count + message overhead.

    `count_messages` is a sum of per-message costs plus the reply primer, so the cost of
    an item is `message_tokens` of its message; with a stored count, only the framing
    (the message with empty content) is measured, and that is cached by role.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.base = REPLY_PRIMER_TOKENS  # paid once per request, not per message
        self.framing_by_role: dict[str, int] = {}  # plain messages' framing, by role
        self.tokenized = 0  # how many items had to be tokenized (no stored count)

    def overhead(self, item: HistoryItem) -> int:
        if item.plain:
            cached = self.framing_by_role.get(item.role)
            if cached is None:
                cached = self._empty_cost(item)
                self.framing_by_role[item.role] = cached
            return cached
        return self._empty_cost(item)

    def _empty_cost(self, item: HistoryItem) -> int:
        message = item.to_message()
        message["content"] = ""
        return message_tokens(message, self.counter)

    def of(self, item: HistoryItem) -> int:
        """Tokens this item adds to a request."""
        tokens = item.tokens
        if tokens is None or tokens < 0 or not isinstance(item.content, str):
            self.tokenized += 1
            if not isinstance(item.content, str):  # multimodal: count the whole message
                return message_tokens(item.to_message(), self.counter)
            tokens = self.counter.count(item.content)
        return tokens + self.overhead(item)


@dataclass(frozen=True, slots=True)
class HistoryFit:
    """Which suffix of the history fits: source[start:] is kept.

    The kept part is always one unbroken suffix, so only `start` is recorded; the kept
    items and their messages are made on request (a stored-turn history renders its
    messages straight from the turns, without HistoryItems in between).
    """

    start: int
    length: int
    tokens: int  # chat-format tokens of the kept messages (no reply priming)
    tokenized: int  # items counted with the tokenizer because they had no stored count
    group_cut: bool = False  # the first item that did not fit was part of a tool group
    source: Sequence[HistoryItem] = ()  # the history that was fitted

    @property
    def items(self) -> list[HistoryItem]:
        """The kept items, oldest first."""
        return [self.source[i] for i in range(self.start, self.length)]

    @property
    def kept(self) -> int:
        return self.length - self.start

    @property
    def kept_ids(self) -> list[HistoryId]:
        if isinstance(self.source, TurnHistory):
            return self.source.ids(self.start)
        return [item.id for item in self.items]

    def messages(self) -> list[dict[str, Any]]:
        """The kept items as OpenAI chat messages, oldest first."""
        if isinstance(self.source, TurnHistory):
            return self.source.messages(self.start)
        return [item.to_message() for item in self.items]

    @property
    def excluded(self) -> int:
        return self.start


def _take_unit(
    items: Sequence[HistoryItem], end: int, item: HistoryItem
) -> list[HistoryItem] | None:
    """The unit ending at index `end`, newest first: a tool group or a single item.

    A unit is a run of items sharing a `group`, or, for items without one, a run of
    `tool` messages together with the assistant message that called them. None for a
    tool run with no calling assistant message: it cannot be sent, so fitting stops.
    """
    unit = [item]
    index = end
    if item.group is not None:
        while index > 0:
            prev = items[index - 1]
            if prev.group != item.group:
                break
            unit.append(prev)
            index -= 1
        return unit
    if item.role != "tool":
        return unit
    while index > 0:
        prev = items[index - 1]
        index -= 1
        if prev.group is None and prev.role == "tool":
            unit.append(prev)
            continue
        if prev.group is None and prev.role == "assistant" and prev.tool_calls:
            unit.append(prev)
            return unit
        break
    return None


def fit_history(
    items: Sequence[HistoryItem],
    budget: int,
    cost: MessageCost,
    *,
    max_items: int | None = None,
) -> HistoryFit:
    """Keep the longest suffix of `items` whose cost fits `budget`, whole groups only.

    Walks newest-first and stops at the first unit that does not fit. Touches only the
    kept items plus one unit, whatever `len(items)` is.
    """
    length = len(items)
    total, start, tokenized_before = 0, length, cost.tokenized
    group_cut = False
    floor = 0 if max_items is None else max(0, length - max_items)
    of = cost.of
    framing = cost.framing_by_role
    turns = items if isinstance(items, TurnHistory) else None
    while start > floor:
        if turns is not None:  # stored turns: no HistoryItem for the plain ones
            start, total, full = turns.plain_suffix(start, floor, total, budget, framing)
            if full or start <= floor:
                break
        item = items[start - 1]
        # Fast path, the common case: a plain message with a stored count.
        if (
            item.group is None
            and item.tool_calls is None
            and item.tool_call_id is None
            and item.name is None
            and item.tokens is not None
            and item.role != "tool"
            and item.role in framing
            and item.content.__class__ is str
            and item.tokens >= 0
        ):
            unit_cost = item.tokens + framing[item.role]
            if total + unit_cost > budget:
                break
            total += unit_cost
            start -= 1
            continue
        unit = _take_unit(items, start - 1, item)
        if unit is None or start - len(unit) < floor:
            break
        unit_cost = of(unit[0]) if len(unit) == 1 else sum(of(item) for item in unit)
        if total + unit_cost > budget:
            group_cut = len(unit) > 1
            break
        total += unit_cost
        start -= len(unit)
    return HistoryFit(
        start=start,
        length=length,
        tokens=total,
        tokenized=cost.tokenized - tokenized_before,
        group_cut=group_cut,
        source=items,
    )


class Uncounted(_LazyView):
    """A view that hides stored counts, so every kept item is counted now."""

    def __init__(self, items: Sequence[HistoryItem]) -> None:
        super().__init__(items)

    def _item(self, index: int) -> HistoryItem:
        item = self._source[index]
        return HistoryItem(
            item.id,
            item.role,
            item.content,
            None,
            item.group,
            item.name,
            item.tool_calls,
            item.tool_call_id,
        )


def as_history_items(history: Sequence[Any]) -> Sequence[HistoryItem]:
    """Wrap dicts or stored turns in a lazy HistoryItem view (looks at one item only)."""
    if not history:
        return []
    probe = history[-1]
    if isinstance(probe, HistoryItem):
        return history
    if isinstance(probe, Mapping):
        return DictHistory(history)
    if hasattr(probe, "token_count") and hasattr(probe, "kind"):
        return TurnHistory(history)
    raise TypeError(f"history items must be HistoryItem, dict or Turn, not {type(probe).__name__}")


def id_ranges(ids: Sequence[HistoryId]) -> list[tuple[HistoryId, HistoryId]]:
    """Compress ids into inclusive (first, last) runs of consecutive integers."""
    ranges: list[tuple[HistoryId, HistoryId]] = []
    for value in ids:
        if ranges:
            first, last = ranges[-1]
            if isinstance(value, int) and isinstance(last, int) and value == last + 1:
                ranges[-1] = (first, value)
                continue
        ranges.append((value, value))
    return ranges
