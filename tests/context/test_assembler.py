"""core/context/assembler.py: priorities, exact budgets, boundary truncation, overflow, caching."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.context.assembler import ComponentPriority, ContextAssembler, ContextOverflowError
from core.context.truncation import TRUNCATION_MARKER
from core.text.tokens import EstimateCounter, TokenCounter, get_counter

P = ComponentPriority


class CountingCounter:
    """A real counter (delegates to the exact one) that records what it was asked to count."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self.name = inner.name
        self.exact = inner.exact
        self.pretokenized = getattr(inner, "pretokenized", False)
        self.calls: list[str] = []

    def count(self, text: str) -> int:
        self.calls.append(text)
        return self.inner.count(text)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter()


def test_sections_in_priority_order_stable_among_equals(counter: TokenCounter) -> None:
    a = ContextAssembler(max_tokens=1000, token_counter=counter)
    a.add_component("memory", "likes tea", P.MEDIUM)
    a.add_component("identity", "I am chatterd.", P.CRITICAL, truncatable=False)
    a.add_component("first-low", "one", P.LOW)
    a.add_component("rules", "Be kind.", P.HIGH)
    a.add_component("second-low", "two", P.LOW)
    a.add_component("empty", "   \n ", P.CRITICAL)
    a.add_component("none", None, P.CRITICAL)
    text = a.assemble()
    assert text == (
        "# identity\nI am chatterd.\n\n# rules\nBe kind.\n\n# memory\nlikes tea\n\n"
        "# first-low\none\n\n# second-low\ntwo"
    )
    summary = a.get_summary()
    assert [c["name"] for c in summary["components"]] == [
        "identity",
        "rules",
        "memory",
        "first-low",
        "second-low",
    ]
    assert summary["total_tokens"] == counter.count(text) == summary["requested_tokens"]
    assert summary["overflow"] == 0 and summary["budget"] == 1000 and summary["exact"] is True
    assert all(c["status"] == "included" for c in summary["components"])
    assert sum(c["kept_tokens"] for c in summary["components"]) == summary["total_tokens"]


def test_insertion_order_keeps_order_but_cuts_by_priority(counter: TokenCounter) -> None:
    a = ContextAssembler(max_tokens=60, token_counter=counter, order="insertion")
    a.add_component("search", "result line. " * 200, P.OPTIONAL)
    a.add_component("identity", "I am chatterd.", P.CRITICAL, truncatable=False)
    a.add_component("time", "Monday 10:00 UTC", P.HIGH)
    text = a.assemble()
    assert text.index("# search") < text.index("# identity") < text.index("# time")
    rows = {c["name"]: c for c in a.get_summary()["components"]}
    assert rows["search"]["status"] == "truncated"
    assert rows["identity"]["status"] == rows["time"]["status"] == "included"
    assert counter.count(text) == a.get_summary()["total_tokens"] <= 60


def test_truncates_at_line_boundary_and_marks_the_cut(counter: TokenCounter) -> None:
    lines = [f"- fact {i}: the user likes item number {i}." for i in range(100)]
    a = ContextAssembler(max_tokens=150, token_counter=counter)
    a.add_component("identity", "I am chatterd.", P.CRITICAL, truncatable=False)
    a.add_component("memory", "\n".join(lines), P.MEDIUM)
    text = a.assemble()
    body = text.split("# memory\n", 1)[1]
    assert body.endswith("\n" + TRUNCATION_MARKER)
    kept = body[: -len(TRUNCATION_MARKER) - 1].split("\n")
    assert kept == lines[: len(kept)] and len(kept) >= 5  # whole lines only
    summary = a.get_summary()
    assert summary["total_tokens"] == counter.count(text) <= 150
    memory = summary["components"][1]
    assert memory["status"] == "truncated" and 0 < memory["kept_tokens"] < memory["tokens"]
    assert summary["overflow"] == summary["requested_tokens"] - 150 > 0


@pytest.mark.parametrize(
    ("content", "ends_with"),
    [
        ("This is one sentence. " * 60, "sentence."),
        ("今天天气很好。我们去公园吧！" * 60, ("。", "！")),
    ],
)
def test_single_line_cuts_at_sentence_end(
    counter: TokenCounter, content: str, ends_with: str | tuple[str, ...]
) -> None:
    a = ContextAssembler(max_tokens=80, token_counter=counter)
    a.add_component("notes", content, P.LOW)
    body = a.assemble().split("# notes\n", 1)[1]
    kept = body[: -len(TRUNCATION_MARKER) - 1]
    assert kept.endswith(ends_with) and content.startswith(kept)
    assert a.get_summary()["total_tokens"] <= 80


def test_text_without_boundaries_is_cut_hard_but_fits(counter: TokenCounter) -> None:
    a = ContextAssembler(max_tokens=50, token_counter=counter)
    a.add_component("blob", "x" * 5000, P.LOW)
    text = a.assemble()
    assert text.endswith(TRUNCATION_MARKER)
    assert counter.count(text) == a.get_summary()["total_tokens"] <= 50


def test_lowest_priority_goes_first_and_tiny_leftovers_are_dropped(
    counter: TokenCounter,
) -> None:
    a = ContextAssembler(max_tokens=200, token_counter=counter, min_truncated_tokens=32)
    a.add_component("identity", "I am chatterd. " * 10, P.CRITICAL, truncatable=False)
    a.add_component("memory", "The user likes green tea.\n" * 20, P.MEDIUM)
    a.add_component("search", "Search result text.\n" * 50, P.OPTIONAL)
    rows = {c["name"]: c for c in a.get_summary()["components"]}
    assert rows["memory"]["status"] == "included"
    assert rows["search"]["status"] in ("truncated", "dropped")
    a.max_tokens = rows["identity"]["tokens"] + rows["memory"]["tokens"] + 20
    rows = {c["name"]: c for c in a.get_summary()["components"]}
    assert rows["search"]["status"] == "dropped" and rows["search"]["kept_tokens"] == 0
    assert "# search" not in a.assemble()


def test_non_truncatable_overflow_raises_naming_them(counter: TokenCounter) -> None:
    a = ContextAssembler(max_tokens=20, token_counter=counter)
    a.add_component("identity", "I am chatterd, a very helpful bot. " * 5, P.CRITICAL, False)
    a.add_component("rules", "Never share one user's data with another.", P.HIGH, False)
    a.add_component("memory", "likes tea", P.LOW)
    with pytest.raises(ContextOverflowError) as err:
        a.assemble()
    assert err.value.components == ["identity", "rules"]
    assert err.value.budget == 20 and err.value.required_tokens > 20
    assert "identity" in str(err.value) and "rules" in str(err.value)
    with pytest.raises(ContextOverflowError):
        a.get_summary()


def test_unchanged_components_are_not_retokenized(counter: TokenCounter) -> None:
    spy = CountingCounter(counter)
    a = ContextAssembler(max_tokens=5000, token_counter=spy)
    a.add_component("identity", "I am chatterd." * 50, P.CRITICAL, truncatable=False)
    a.add_component("memory", "likes tea\n" * 100, P.MEDIUM)
    a.add_component("time", "Monday 10:00", P.HIGH)
    first = a.assemble()
    spy.calls.clear()
    assert a.assemble() == first and a.get_summary()["total_tokens"] == counter.count(first)
    assert spy.calls == []
    a.add_component("time", "Monday 10:01", P.HIGH)  # the per-turn change
    a.add_component("memory", "likes tea\n" * 100, P.MEDIUM)  # same content: no-op
    second = a.assemble()
    assert all("likes tea" not in call and "I am chatterd" not in call for call in spy.calls)
    assert a.get_summary()["total_tokens"] == counter.count(second) <= 5000
    assert second.index("# time") < second.index("# memory")  # replaced in place


def test_long_component_truncation_is_quick(counter: TokenCounter) -> None:
    spy = CountingCounter(counter)
    a = ContextAssembler(max_tokens=4000, token_counter=spy)
    a.add_component("search", "Some search result sentence here. 这是搜索结果。\n" * 8000, P.LOW)
    start = time.perf_counter()
    text = a.assemble()
    assert time.perf_counter() - start < 5.0
    assert len(spy.calls) < 40
    assert counter.count(text) == a.get_summary()["total_tokens"] <= 4000


def test_estimate_counter_is_recounted_and_fits() -> None:
    est = EstimateCounter()
    a = ContextAssembler(max_tokens=100, token_counter=est)
    a.add_component("identity", "I am chatterd.", P.CRITICAL, truncatable=False)
    a.add_component("memory", "用户喜欢喝茶。The user likes tea.\n" * 30, P.MEDIUM)
    summary = a.get_summary()
    assert summary["exact"] is False and summary["tokenizer"] == "estimate"
    assert summary["total_tokens"] == est.count(a.assemble()) <= 100


def test_bad_input_gets_clear_errors(counter: TokenCounter) -> None:
    a = ContextAssembler(token_counter=counter)
    with pytest.raises(ValueError, match="non-empty"):
        a.add_component("  ", "x", P.LOW)
    with pytest.raises(ValueError, match="one line"):
        a.add_component("a\nb", "x", P.LOW)
    with pytest.raises(TypeError, match="priority"):
        a.add_component("a", "x", "high")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="content"):
        a.add_component("a", 42, P.LOW)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        ContextAssembler(max_tokens=0)
    with pytest.raises(ValueError, match="order"):
        ContextAssembler(order="random")  # type: ignore[arg-type]
    assert a.assemble() == "" and a.get_summary()["total_tokens"] == 0
    a.add_component("a", "x", P.LOW)
    assert a.remove_component("a") and not a.remove_component("a")
    a.add_component("b", "y", P.LOW)
    a.add_component("b", "", P.LOW)  # empty content clears the component
    assert len(a) == 0


TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("的一是不了人我在有他这为之大来以个中上们。，！？"),
        st.sampled_from(
            list("abcdefghij klmnop QRST 0123 .,!?;\n\n")
            + ["😀", "👍", "\U0001f3fd", "\u200d", "e", "\u0301"]
        ),
    ),
    min_size=1,
    max_size=400,
)
COMPONENT = st.tuples(
    TEXT,
    st.sampled_from(list(ComponentPriority) + [10, 95]),
    st.booleans(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    components=st.lists(COMPONENT, min_size=1, max_size=6),
    budget=st.integers(min_value=1, max_value=600),
    order=st.sampled_from(["priority", "insertion"]),
    encoding=st.sampled_from(["o200k_base", "cl100k_base", "estimate"]),
)
def test_budget_is_never_exceeded(
    components: list[tuple[str, int, bool]], budget: int, order: str, encoding: str
) -> None:
    counter = get_counter(encoding)
    a = ContextAssembler(max_tokens=budget, token_counter=counter, order=order)  # type: ignore[arg-type]
    for n, (content, priority, truncatable) in enumerate(components):
        a.add_component(f"c{n}", content, priority, truncatable)
    required = ContextAssembler(max_tokens=10**9, token_counter=counter, order=order)  # type: ignore[arg-type]
    for n, (content, priority, truncatable) in enumerate(components):
        if not truncatable:
            required.add_component(f"c{n}", content, priority, False)
    try:
        text = a.assemble()
    except ContextOverflowError as err:
        assert counter.count(required.assemble()) > budget
        assert set(err.components) == {
            f"c{n}" for n, (text, _, trunc) in enumerate(components) if not trunc and text.strip()
        }
        return
    summary = a.get_summary()
    assert summary["total_tokens"] == counter.count(text) <= budget
    rows = {row["name"]: row for row in summary["components"]}
    for n, (content, _, truncatable) in enumerate(components):
        row, name = rows.get(f"c{n}"), f"c{n}"
        if not content.strip():
            assert row is None
            continue
        assert row is not None
        section = f"# {name}\n{content.lstrip(chr(13) + chr(10)).rstrip()}"
        if not truncatable or row["status"] == "included":
            assert row["status"] == "included" and section in text
        elif row["status"] == "truncated":
            assert f"# {name}\n" in text and TRUNCATION_MARKER in text
        else:
            assert row["status"] == "dropped" and f"# {name}\n" not in text
    if counter.exact:
        assert sum(r["kept_tokens"] for r in summary["components"]) == summary["total_tokens"]
