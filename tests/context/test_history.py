"""History fitting: newest first, stored counts trusted, groups whole, no gaps."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.context.history import MessageCost, fit_history
from core.context.history_views import DictHistory, HistoryItem, TurnHistory, turn_message
from core.text.tokens import TokenCounter, count_messages, get_counter


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter("o200k_base")


class CountingCounter:
    """A real counter that also counts how often it is asked (cold-build accounting)."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner, self.name, self.exact, self.calls = inner, inner.name, inner.exact, 0

    def count(self, text: str) -> int:
        self.calls += 1
        return self.inner.count(text)


@dataclass
class StoredTurn:  # the shape of memory.turns.types.Turn that TurnHistory reads
    id: int
    role: str
    kind: str
    content: str
    token_count: int
    meta: dict[str, Any] = field(default_factory=dict)


def items_of(texts: Sequence[str], counter: TokenCounter | None = None) -> list[HistoryItem]:
    return [
        HistoryItem(
            id=i + 1,
            role="user" if i % 2 == 0 else "assistant",
            content=text,
            tokens=counter.count(text) if counter else None,
        )
        for i, text in enumerate(texts)
    ]


def exact_cost(items: Sequence[HistoryItem], counter: TokenCounter) -> int:
    return count_messages([i.to_message() for i in items], counter) - count_messages([], counter)


def test_keeps_newest_suffix_within_budget(counter: TokenCounter) -> None:
    items = items_of([f"message number {i} with some words" for i in range(50)], counter)
    cost = MessageCost(counter)
    one = cost.of(items[-1])
    fit = fit_history(items, one * 10, cost)
    assert fit.kept == 10 and fit.excluded == 40
    assert fit.kept_ids == list(range(41, 51))
    assert fit.tokens == exact_cost(fit.items, counter) <= one * 10
    assert fit.tokenized == 0  # every item had a stored count


def test_stops_at_first_item_that_does_not_fit_no_gaps(counter: TokenCounter) -> None:
    texts = ["short"] * 5 + ["a long message " * 200] + ["short"] * 5
    items = items_of(texts, counter)
    cost = MessageCost(counter)
    fit = fit_history(items, cost.of(items[0]) * 8, cost)
    assert fit.kept_ids == list(range(7, 12))  # the long one blocks; older short ones not kept


def test_missing_counts_are_counted_only_for_kept_plus_one(counter: TokenCounter) -> None:
    spy = CountingCounter(counter)
    items = items_of([f"turn {i}: hello there" for i in range(1000)])  # no stored counts
    cost = MessageCost(spy)
    probe = MessageCost(counter).of(items[-1])
    cost.overhead(items[0]), cost.overhead(items[1])  # role framing, measured once per role
    spy.calls = 0
    fit = fit_history(items, probe * 20, cost)
    assert 18 <= fit.kept <= 20
    assert fit.tokenized == fit.kept + 1
    assert spy.calls == fit.kept + 1  # one count per kept item plus the one that failed


def test_stored_counts_are_trusted_not_recounted(counter: TokenCounter) -> None:
    spy = CountingCounter(counter)
    items = [HistoryItem(id=1, role="user", content="x" * 10_000, tokens=5)]
    cost = MessageCost(spy)
    fit = fit_history(items, 100, cost)
    assert fit.kept == 1 and fit.tokenized == 0
    calls = spy.calls  # only the role framing of "user" was measured
    fit_history(items * 50, 10_000, cost)
    assert spy.calls == calls  # and never again
    assert spy.calls <= 2


def test_tool_group_never_split(counter: TokenCounter) -> None:
    items = [
        HistoryItem(1, "user", "what's the weather", 4),
        HistoryItem(2, "assistant", "[Search: weather]", 5, group="g1"),
        HistoryItem(3, "user", "result " * 50, 100, group="g1"),
        HistoryItem(4, "assistant", "It is sunny.", 4),
    ]
    cost = MessageCost(counter)
    last = cost.of(items[3])
    group = cost.of(items[1]) + cost.of(items[2])
    fit = fit_history(items, last + group - 1, cost)  # the group does not fit whole
    assert fit.kept_ids == [4] and fit.group_cut
    fit = fit_history(items, last + group, cost)
    assert fit.kept_ids == [2, 3, 4] and not fit.group_cut


def test_openai_tool_messages_grouped_without_group_ids(counter: TokenCounter) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "result one"},
        {"role": "tool", "tool_call_id": "c1", "content": "result two"},
    ]
    history = DictHistory(messages)
    cost = MessageCost(counter)
    unit = sum(cost.of(history[i]) for i in (1, 2, 3))
    assert fit_history(history, unit - 1, cost).kept == 0
    fit = fit_history(history, unit, cost)
    assert [i.role for i in fit.items] == ["assistant", "tool", "tool"]


def test_orphan_tool_result_is_never_first(counter: TokenCounter) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "gone", "content": "stale result"},
        {"role": "assistant", "content": "hello"},
    ]
    fit = fit_history(DictHistory(messages), 10_000, MessageCost(counter))
    assert [i.role for i in fit.items] == ["assistant"]


def test_max_items_caps_kept(counter: TokenCounter) -> None:
    items = items_of(["hi"] * 30, counter)
    assert fit_history(items, 10**6, MessageCost(counter), max_items=7).kept == 7


def test_multimodal_item_counted_with_image_cost(counter: TokenCounter) -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
    item = HistoryItem(1, "user", parts, tokens=None)
    assert MessageCost(counter).of(item) == exact_cost([item], counter)


def test_turn_history_view_groups_tool_rounds(counter: TokenCounter) -> None:
    turns = [
        StoredTurn(10, "user", "message", "[ann]: weather?", 6),
        StoredTurn(11, "assistant", "tool_call", "[Search: weather]", 5),
        StoredTurn(12, "user", "tool_result", "<results>sunny</results>", 8),
        StoredTurn(13, "assistant", "tool_call", "", 0, {"tool_calls": [{"id": "c"}]}),
        StoredTurn(14, "tool", "tool_result", "ok", 1, {"tool_call_id": "c"}),
        StoredTurn(15, "assistant", "message", "Sunny.", 2),
    ]
    view = TurnHistory(turns)
    assert view[1].group == view[2].group == "tools:11"
    assert view[3].group == view[4].group == "tools:13"
    assert view[4].tool_call_id == "c" and view[3].tool_calls == ({"id": "c"},)
    assert view[0].tokens == 6 and view[-1].id == 15
    cost = MessageCost(counter)
    need = sum(cost.of(view[i]) for i in (3, 4, 5))
    assert fit_history(view, need + 1, cost).kept_ids == [13, 14, 15]


def test_cost_independent_of_history_length(counter: TokenCounter) -> None:
    """A 100,000-turn history is never copied: peak extra memory stays small."""

    class Huge(Sequence[HistoryItem]):
        def __init__(self, n: int) -> None:
            self.n, self.touched = n, 0

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: Any) -> Any:
            self.touched += 1
            return HistoryItem(id=i, role="user", content="hello world", tokens=2)

    huge = Huge(100_000)
    cost = MessageCost(counter)
    each = cost.of(huge[0])
    huge.touched = 0
    tracemalloc.start()
    fit = fit_history(huge, 4000, cost)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert fit.kept == 4000 // each
    assert huge.touched == fit.kept + 1
    assert peak < 1024 * 1024


def test_one_rule_turns_a_stored_turn_into_a_message() -> None:
    """turn_message is what the tool loop sends and what the history view replays."""
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    assert turn_message("assistant", "", {"tool_calls": [call]}) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [call],
    }
    assert turn_message("assistant", "let me look", {"tool_calls": [call]})["content"] == (
        "let me look"
    )
    assert turn_message("tool", "ok", {"tool_call_id": "c", "name": "search"}) == {
        "role": "tool",
        "tool_call_id": "c",
        "content": "ok",
    }
    marker = {"calls": [{"tool": "search", "arg": "x"}]}
    assert turn_message("assistant", "[Search: x]", marker) == {
        "role": "assistant",
        "content": "[Search: x]",
    }
    assert turn_message("user", "hi", {}) == {"role": "user", "content": "hi"}
    turns = [
        StoredTurn(1, "assistant", "tool_call", "", 0, {"tool_calls": [call]}),
        StoredTurn(2, "tool", "tool_result", "ok", 1, {"tool_call_id": "c"}),
    ]
    view = TurnHistory(turns)
    assert view.messages(0) == [turn_message(t.role, t.content, t.meta) for t in turns]


texts = st.lists(st.sampled_from(list("ab 你好\n,.!") + ["word", "中文"]), max_size=30).map("".join)
item_specs = st.lists(
    st.tuples(texts, st.booleans(), st.integers(0, 3), st.booleans()), min_size=0, max_size=40
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=item_specs, budget=st.integers(0, 400))
def test_property_fit_is_within_budget_whole_groups_and_maximal(
    counter: TokenCounter, specs: list[tuple[str, bool, int, bool]], budget: int
) -> None:
    items = []
    run = 0  # groups are contiguous runs, as tool calls and their results are when stored
    for i, (text, stored, group, user) in enumerate(specs):
        grouped = group == 0
        if not grouped or (i > 0 and items[-1].group is None):
            run += 1
        items.append(
            HistoryItem(
                id=i,
                role="user" if user else "assistant",
                content=text,
                tokens=counter.count(text) if stored else None,
                group=f"g{run}" if grouped else None,
            )
        )
    cost = MessageCost(counter)
    fit = fit_history(items, budget, cost)
    assert fit.tokens == exact_cost(fit.items, counter) <= budget
    assert fit.items == items[fit.start :]  # a suffix: no gaps
    kept_groups = {i.group for i in fit.items if i.group}
    for item in items[: fit.start]:
        assert item.group not in kept_groups  # groups never split
    if fit.start > 0:  # maximal: the next older unit would not have fitted
        unit = [i for i in items[: fit.start] if i.group and i.group == items[fit.start - 1].group]
        unit = unit or [items[fit.start - 1]]
        assert fit.tokens + exact_cost(unit, counter) > budget


def test_python_version_supported() -> None:
    assert sys.version_info >= (3, 11)


turn_specs = st.lists(
    st.tuples(texts, st.sampled_from(["message", "context", "tool_call", "summary"])),
    max_size=40,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(specs=turn_specs, budget=st.integers(0, 400), max_items=st.none() | st.integers(0, 40))
def test_property_stored_turns_fit_exactly_like_their_items(
    counter: TokenCounter,
    specs: list[tuple[str, str]],
    budget: int,
    max_items: int | None,
) -> None:
    """The stored-turn fast path (no HistoryItems) decides as the general path does."""
    turns: list[StoredTurn] = []
    for i, (text, kind) in enumerate(specs):
        role = "assistant" if kind == "tool_call" or i % 2 else "user"
        turns.append(StoredTurn(i + 1, role, kind, text, counter.count(text)))
        if kind == "tool_call":  # a call is followed by its result
            result = f"result of {i}"
            turns.append(StoredTurn(-(i + 1), "user", "tool_result", result, counter.count(result)))
    view = TurnHistory(turns)
    fast = fit_history(view, budget, MessageCost(counter), max_items=max_items)
    general = fit_history(list(view), budget, MessageCost(counter), max_items=max_items)
    assert (fast.start, fast.tokens, fast.group_cut) == (
        general.start,
        general.tokens,
        general.group_cut,
    )
    assert fast.kept_ids == general.kept_ids
    assert fast.messages() == general.messages() == [i.to_message() for i in general.items]
    assert fast.tokens == exact_cost(fast.items, counter) <= budget
