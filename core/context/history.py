"""Fitting stored conversation history into a token budget, newest first.

The fitter indexes any `Sequence` of HistoryItems from the end, so its cost depends on
what it keeps, never on the history's length; it trusts stored token counts and counts
only items that lack one. It keeps one unbroken suffix (a conversation with holes reads
as nonsense) and never separates an assistant tool call from its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.context.budget import framing_tokens
from core.context.history_views import HistoryId, HistoryItem, TurnHistory
from core.text.tokens import REPLY_PRIMER_TOKENS, TokenCounter, message_tokens


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
                cached = framing_tokens(item.role, self.counter)
                self.framing_by_role[item.role] = cached
            return cached
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
