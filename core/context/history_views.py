"""Stored conversation history as the context engine reads it: items and lazy views.

The views wrap a history without copying it and make a HistoryItem only for what the
fitter reaches, so a build's cost depends on what it keeps, never on the history's
length. `turn_message` is the one rule for how a stored turn reads as a chat message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, overload

HistoryId = int | str


@dataclass(slots=True)
class HistoryItem:
    """One stored message of the conversation, as the context engine needs it.

    Treat it as immutable; it is not frozen because frozen dataclasses are slower to
    create, and views create one per history item they are asked for.

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


def turn_message(role: str, content: str, meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """The OpenAI chat message of a stored turn, or of a tool turn about to be stored.

    Native tool calls live in `meta`: an assistant turn's `tool_calls` (with its text, or
    None when it wrote none, as the API does) and a `tool` turn's `tool_call_id`. Every
    other turn, marker-mode tool turns included, is its role and text.
    """
    if meta:
        if role == "assistant":
            calls = meta.get("tool_calls")
            if calls:
                return {
                    "role": "assistant",
                    "content": content or None,
                    "tool_calls": [dict(call) for call in calls],
                }
        elif role == "tool":
            call_id = meta.get("tool_call_id")
            if call_id is not None:
                return {"role": "tool", "tool_call_id": call_id, "content": content}
    return {"role": role, "content": content}


class _LazyView(Sequence[HistoryItem]):
    """A read-only HistoryItem view over another sequence; items are made on access.

    Nothing is copied, so a history costs only the items the fitter reaches. Subclasses
    say how one source element becomes an item (`_item`).
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
    """Stored turns (`memory.turns.types.Turn`), oldest first, as HistoryItems.

    Stored token counts are used as they are. Tool rounds are grouped by the id of their
    `tool_call` turn, so a call and its results are kept or dropped together; native
    tool calls (`meta.tool_calls`, `meta.tool_call_id`) become OpenAI tool messages, as
    `turn_message` writes them.
    """

    def __init__(self, turns: Sequence[Any]) -> None:
        super().__init__(turns)
        self._turns = turns  # the same sequence, named for the fast paths below

    def _item(self, index: int) -> HistoryItem:
        turn = self._turns[index]
        kind = turn.kind
        item = HistoryItem(turn.id, turn.role, turn.content, turn.token_count)
        if kind != "tool_call" and kind != "tool_result":
            return item
        # A tool round's turn: the same item, plus its group and its OpenAI tool fields.
        message = turn_message(turn.role, turn.content, turn.meta)
        group = f"tools:{turn.id}" if kind == "tool_call" else self._caller_group(index)
        calls = message.get("tool_calls")
        return replace(
            item,
            group=group,
            tool_calls=tuple(calls) if calls else None,
            tool_call_id=message.get("tool_call_id"),
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
        """Turns start.. as chat messages (tool turns through `turn_message`)."""
        turns = self._turns
        out: list[dict[str, Any]] = []
        for index in range(start, len(turns)):
            turn = turns[index]
            if turn.kind != "tool_call" and turn.kind != "tool_result":
                out.append({"role": turn.role, "content": turn.content})
            else:
                out.append(turn_message(turn.role, turn.content, turn.meta))
        return out

    def ids(self, start: int) -> list[HistoryId]:
        turns = self._turns
        return [turns[index].id for index in range(start, len(turns))]


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
