"""Assemble a system prompt from prioritised components under an exact token budget.

When it does not fit, the least important material goes first, cut at a readable
boundary and marked, and the caller learns exactly what was kept. A component marked
`tail` (this turn's own material) renders as a second text (`assembled_tail`) sent after
the history, so the stable part stays an identical prefix; priorities span both.

Exact without recounting: sections are "# NAME\\ncontent" joined by a blank line, and
for a regex-pretokenizing BPE (`counter.pretokenized`) a newline before "#" is always a
piece boundary, so the total is the sum of per-component counts, each cached. Other
counters get a full recount.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal

from core.context.budget import resolve_counter
from core.context.truncation import SECTION_SEPARATOR, Cut, cut_section
from core.text.tokens import TokenCounter

log = logging.getLogger(__name__)

_CUT_CACHE_SIZE = 8
_FULL = "full"

Order = Literal["priority", "insertion"]


class ComponentPriority(IntEnum):
    """How much a component matters; lower priorities are truncated or dropped first."""

    CRITICAL = 100
    HIGH = 90
    MEDIUM = 70
    LOW = 50
    OPTIONAL = 30


class ContextOverflowError(ValueError):
    """Material that may not be cut does not fit the budget; never dropped silently."""

    def __init__(self, components: list[tuple[str, int]], required_tokens: int, budget: int):
        self.components = [name for name, _ in components]
        self.required_tokens = required_tokens
        self.budget = budget
        detail = ", ".join(f"{name} ({tokens} tokens)" for name, tokens in components)
        super().__init__(
            f"non-truncatable context needs {required_tokens} tokens but the budget is "
            f"{budget}: {detail}"
        )


@dataclass(eq=False)
class _Component:
    name: str
    content: str
    priority: int
    truncatable: bool
    seq: int
    tail: bool = False  # this turn's own material, rendered after the history
    sep_tokens: int = -1  # count(section + separator); -1 = not counted yet
    bare_tokens: int = -1  # count(section)
    cuts: dict[int, Cut | None] = field(default_factory=dict)

    @property
    def section(self) -> str:
        return f"# {self.name}\n{self.content}"


@dataclass
class _Plan:
    text: str
    total: int
    requested: int
    rows: list[dict[str, Any]]
    tail_text: str = ""
    tail_total: int = 0


class ContextAssembler:
    """Collects named components and assembles them within `max_tokens`.

    Adding a component whose name exists replaces it in place (same insertion slot), so
    one assembler can be kept and updated turn after turn; unchanged components are
    never re-tokenized and an unchanged assembler returns its cached result.
    """

    def __init__(
        self,
        max_tokens: int = 16000,
        token_counter: TokenCounter | str | None = None,
        order: Order = "priority",
        *,
        min_truncated_tokens: int = 32,
    ) -> None:
        if order not in ("priority", "insertion"):
            raise ValueError(f"order must be 'priority' or 'insertion', not {order!r}")
        if not isinstance(min_truncated_tokens, int) or min_truncated_tokens < 1:
            raise ValueError("min_truncated_tokens must be a positive int")
        self._counter: TokenCounter = resolve_counter(token_counter)
        self._order: Order = order
        self.min_truncated_tokens = min_truncated_tokens
        self._max_tokens = _check_budget(max_tokens)
        self._components: dict[str, _Component] = {}
        self._seq = 0
        self._version = 0
        self._cached: tuple[int, _Plan] | None = None

    @property
    def token_counter(self) -> TokenCounter:
        return self._counter

    @property
    def order(self) -> Order:
        return self._order

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    @max_tokens.setter
    def max_tokens(self, value: int) -> None:
        self._max_tokens = _check_budget(value)
        self._version += 1

    def add_component(
        self,
        name: str,
        content: str | None,
        priority: int,
        truncatable: bool = True,
        *,
        tail: bool = False,
    ) -> None:
        """Add or replace a component. Empty content adds nothing (and clears `name`).

        `tail` puts it in the second text (`assembled_tail`), after the history.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError("component name must be a non-empty string")
        if "\n" in name or "\r" in name:
            raise ValueError(f"component name must be one line: {name!r}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority must be an int (ComponentPriority), not {priority!r}")
        if content is not None and not isinstance(content, str):
            raise TypeError(f"content of {name!r} must be str, not {type(content).__name__}")
        name = name.strip()
        # Leading blank lines and trailing whitespace carry nothing, and a section that ends
        # in non-space is what makes the separator a clean token boundary.
        text = (content or "").lstrip("\r\n").rstrip()
        old = self._components.get(name)
        if not text:
            if old is not None:
                del self._components[name]
                self._version += 1
            return
        if old is not None and old.tail != bool(tail):
            del self._components[name]  # moving between places is a new component
            old = None
        if old is not None:
            if old.content == text and old.priority == priority and old.truncatable == truncatable:
                return
            seq = old.seq
            if old.content == text:  # keep the counts, only the policy changed
                old.priority, old.truncatable = int(priority), bool(truncatable)
                self._version += 1
                return
        else:
            seq = self._seq
            self._seq += 1
        self._components[name] = _Component(
            name, text, int(priority), bool(truncatable), seq, bool(tail)
        )
        self._version += 1

    def remove_component(self, name: str) -> bool:
        """Remove a component; True if it existed."""
        removed = self._components.pop(name, None) is not None
        if removed:
            self._version += 1
        return removed

    def clear(self) -> None:
        self._components.clear()
        self._version += 1

    def __len__(self) -> int:
        return len(self._components)

    def assemble(self) -> str:
        """The prompt: sections "# NAME\\ncontent" joined by a blank line, within budget.

        Only the components not marked `tail`; the tail is `assembled_tail()`.
        """
        return self._plan().text

    def assembled_tail(self) -> str:
        """The `tail` components' text, planned together with `assemble()`'s."""
        return self._plan().tail_text

    def get_summary(self) -> dict[str, Any]:
        """What was kept, truncated and dropped, with exact token counts."""
        plan = self._plan()
        return {
            "components": [dict(row) for row in plan.rows],
            "total_tokens": plan.total,
            "tail_tokens": plan.tail_total,
            "requested_tokens": plan.requested,
            "budget": self._max_tokens,
            "overflow": max(0, plan.requested - self._max_tokens),
            "exact": bool(self.token_counter.exact),
            "tokenizer": self.token_counter.name,
        }

    # -- planning ---------------------------------------------------------------------

    def _plan(self) -> _Plan:
        if self._cached is not None and self._cached[0] == self._version:
            return self._cached[1]
        plan = self._make_plan()
        self._cached = (self._version, plan)
        return plan

    def _ordered(self) -> list[_Component]:
        comps = list(self._components.values())
        if self._order == "insertion":
            return sorted(comps, key=lambda c: (c.tail, c.seq))
        return sorted(comps, key=lambda c: (c.tail, -c.priority, c.seq))

    def _make_plan(self) -> _Plan:
        budget = self._max_tokens
        ordered = self._ordered()
        # The last section of each place is counted bare (no separator follows it); its
        # count with a separator is only needed when something must be cut.
        for group in _places(ordered):
            for comp in group[:-1]:
                self._count_with_separator(comp)
        full: dict[_Component, Cut | str | None] = {c: _FULL for c in ordered}
        requested = self._total(ordered, full)
        choice = dict(full)
        if requested > budget:
            for comp in ordered:
                self._count_with_separator(comp)
            required = [c for c in ordered if not c.truncatable]
            need = self._total(required, full)
            if need > budget:
                raise ContextOverflowError([(c.name, c.sep_tokens) for c in required], need, budget)
            remaining = budget - sum(c.sep_tokens for c in required)
            for comp in sorted(ordered, key=lambda c: (-c.priority, c.seq)):
                if not comp.truncatable:
                    continue
                if comp.sep_tokens <= remaining:
                    remaining -= comp.sep_tokens
                    continue
                cut = self._truncate(comp, remaining)
                choice[comp] = cut
                if cut is not None:
                    remaining -= cut.sep_tokens
            self._fit_exactly(ordered, choice, budget)
        return self._render(ordered, choice, requested)

    def _fit_exactly(
        self, ordered: list[_Component], choice: dict[_Component, Cut | str | None], budget: int
    ) -> None:
        """Shrink the least important kept parts until the exact total fits (rarely needed)."""
        for _ in range(4 * len(ordered) + 4):
            total = self._total(ordered, choice)
            if total <= budget:
                return
            victims = [c for c in ordered if c.truncatable and choice[c] is not None]
            if not victims:
                break
            victim = min(victims, key=lambda c: (c.priority, -c.seq))
            current = choice[victim]
            size = victim.sep_tokens if current == _FULL else current.sep_tokens  # type: ignore[union-attr]
            choice[victim] = self._truncate(victim, size - (total - budget) - 1)
        required = [c for c in ordered if not c.truncatable]
        raise ContextOverflowError(
            [(c.name, c.sep_tokens) for c in required], self._total(required, choice), budget
        )

    def _total(self, ordered: list[_Component], choice: dict[_Component, Any]) -> int:
        """Exact token count of both assembled texts for this choice of kept parts."""
        return sum(self._place_total(group, choice) for group in _places(ordered))

    def _place_total(self, ordered: list[_Component], choice: dict[_Component, Any]) -> int:
        """Exact token count of one place's text for this choice of kept parts."""
        kept = [c for c in ordered if choice.get(c) is not None]
        if not kept:
            return 0
        if not getattr(self.token_counter, "pretokenized", False):
            texts = [self._text_of(c, choice[c]) for c in kept]
            return self._count(SECTION_SEPARATOR.join(texts))
        total = 0
        for comp in kept[:-1]:
            cut = choice[comp]
            total += comp.sep_tokens if cut == _FULL else cut.sep_tokens
        last, cut = kept[-1], choice[kept[-1]]
        if cut == _FULL:
            if last.bare_tokens < 0:
                last.bare_tokens = self._count(last.section)
            return total + last.bare_tokens
        return total + self._count(cut.text)

    @staticmethod
    def _text_of(comp: _Component, cut: Cut | str) -> str:
        return comp.section if cut == _FULL else cut.text  # type: ignore[union-attr]

    def _render(
        self, ordered: list[_Component], choice: dict[_Component, Any], requested: int
    ) -> _Plan:
        texts: list[str] = []
        totals: list[int] = []
        rows: list[dict[str, Any]] = []
        pretokenized = getattr(self.token_counter, "pretokenized", False)
        for group in _places(ordered):
            kept = [c for c in group if choice[c] is not None]
            texts.append(SECTION_SEPARATOR.join(self._text_of(c, choice[c]) for c in kept))
            total = self._place_total(group, choice)
            totals.append(total)
            used = 0
            for comp in group:
                cut = choice[comp]
                if cut is None:
                    status, kept_tokens = "dropped", 0
                elif cut == _FULL:
                    status, kept_tokens = "included", self._requested_tokens(comp)
                else:
                    status, kept_tokens = "truncated", cut.sep_tokens
                if kept and comp is kept[-1] and pretokenized:
                    kept_tokens = total - used
                used += kept_tokens
                row = {
                    "name": comp.name,
                    "priority": comp.priority,
                    "tokens": self._requested_tokens(comp),
                    "kept_tokens": kept_tokens,
                    "truncatable": comp.truncatable,
                    "status": status,
                }
                if comp.tail:
                    row["place"] = "tail"
                rows.append(row)
        head = [t for g, t in zip(_places(ordered), texts, strict=True) if not g[0].tail]
        tail = [t for g, t in zip(_places(ordered), texts, strict=True) if g[0].tail]
        tail_total = sum(t for g, t in zip(_places(ordered), totals, strict=True) if g[0].tail)
        return _Plan(
            text=head[0] if head else "",
            total=sum(totals),
            requested=requested,
            rows=rows,
            tail_text=tail[0] if tail else "",
            tail_total=tail_total,
        )

    def _count_with_separator(self, comp: _Component) -> None:
        if comp.sep_tokens < 0:
            comp.sep_tokens = self._count(comp.section + SECTION_SEPARATOR)

    def _requested_tokens(self, comp: _Component) -> int:
        """The component's full size: with its separator, or bare when it came last."""
        if comp.sep_tokens >= 0:
            return comp.sep_tokens
        if comp.bare_tokens < 0:
            comp.bare_tokens = self._count(comp.section)
        return comp.bare_tokens

    # -- truncation -------------------------------------------------------------------

    def _truncate(self, comp: _Component, target: int) -> Cut | None:
        """The longest boundary-cut version of `comp` whose section + separator fits target."""
        if target in comp.cuts:
            return comp.cuts[target]
        cut = cut_section(
            comp.name, comp.content, comp.sep_tokens, target, self._count, self.min_truncated_tokens
        )
        if len(comp.cuts) >= _CUT_CACHE_SIZE:
            comp.cuts.pop(next(iter(comp.cuts)))
        comp.cuts[target] = cut
        return cut

    def _count(self, text: str) -> int:
        return self.token_counter.count(text)


def _places(ordered: list[_Component]) -> list[list[_Component]]:
    """`ordered` split into its non-empty places: the head, then the tail."""
    head = [c for c in ordered if not c.tail]
    tail = [c for c in ordered if c.tail]
    return [g for g in (head, tail) if g]


def _check_budget(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_tokens must be a positive int, not {value!r}")
    return value


__all__ = ["ComponentPriority", "ContextAssembler", "ContextOverflowError", "Order"]
