"""What one build put in front of the model, as a typed report, and its text for `/context`.

The processor keeps it for `/context` and compaction reads named fields from it; only
`format_report` turns it into text, at the very end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.context.history_views import HistoryId


@dataclass(frozen=True)
class SummaryInfo:
    """The chat's progress summary shown in this context (core/context/compaction.py)."""

    id: int  # the summary turn's id
    through_id: int  # the last turn it covers; the history shown starts after it
    turns: int  # how many turns it folds, earlier summaries included


@dataclass(frozen=True)
class KnowledgeNote:
    """The knowledge base's passages for this turn: the framed text the model sees, and
    the labels of the passages shown and of those the budget left out (for the report).
    `numbers`: (passage key, citation number) of each shown passage, where the turn's
    `knowledge` tool calls continue the numbering (core/knowledge/citations.py)."""

    text: str
    shown: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    numbers: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ContextReport:
    """What one build put in front of the model, and what it left out.

    `total_tokens` is the exact `count_messages` value of the returned messages (given
    stored counts are the counter's); `budget` = window - reply reserve. Dropped history
    is a prefix of the given history: `history_dropped` is how many of its oldest items
    were left out and `dropped_ranges` their (first id, last id) span in history order
    (ids of other chats in between are not implied), so the report stays small whatever
    the history's length. `components` are the assembler's rows (name, priority, tokens,
    kept_tokens, truncatable, status).
    """

    window: int
    reply_reserve: int
    budget: int
    total_tokens: int
    system_tokens: int
    history_tokens: int
    current_tokens: int
    exact: bool
    tokenizer: str
    components: list[dict[str, Any]]
    history_kept: int
    history_dropped: int
    included_ids: list[HistoryId]
    dropped_ranges: list[tuple[HistoryId, HistoryId]]
    history_tokenized: int = 0  # history items counted now (they had no stored count)
    group_cut: bool = False  # fitting stopped at a tool group that did not fit whole
    current_truncated: bool = False
    images: int = 0
    summary: SummaryInfo | None = None  # the progress summary shown above the history
    tool_tokens: int = 0  # function-tool definitions sent beside the messages (native mode)
    tools_dropped: tuple[str, ...] = ()  # tools the sender may use, left out for the budget
    knowledge: KnowledgeNote | None = None  # passages retrieved from the knowledge base
    persona: str = "workspace"  # workspace files, this chat's own file, or `/bot persona`


@dataclass(frozen=True)
class BuiltContext:
    """One build's messages (OpenAI chat format) and its report."""

    messages: list[dict[str, Any]]
    report: ContextReport


def format_report(report: ContextReport) -> str:
    """Components with tokens and status, history kept/dropped, total vs window."""
    exact = "exact" if report.exact else "estimated"
    lines = [
        f"Context of the last turn: {report.total_tokens} / {report.budget} tokens "
        f"({exact}, {report.tokenizer}); window {report.window}, "
        f"{report.reply_reserve} kept free for the reply.",
        "System prompt:",
    ]
    head = [c for c in report.components if c.get("place") != "tail"]
    tail = [c for c in report.components if c.get("place") == "tail"]
    lines += [_component_line(c) for c in head]
    if tail:
        lines.append("This turn's material (after the history):")
        lines += [_component_line(c) for c in tail]
    line = (
        f"History: {report.history_kept} turn(s) kept ({report.history_tokens} tokens), "
        f"{report.history_dropped} dropped"
    )
    ranges = report.dropped_ranges
    if ranges:
        shown = ", ".join(f"#{a}" if a == b else f"#{a}–#{b}" for a, b in ranges[:5])
        line += f" ({shown}{', …' if len(ranges) > 5 else ''})"
    lines.append(line + ".")
    if report.summary is not None:
        lines.append(
            f"Summary: {report.summary.turns} earlier turn(s) folded into one summary "
            f"(through #{report.summary.through_id})."
        )
    lines.append(f"Current message: {report.current_tokens} tokens.")
    lines.append(f"Persona: {report.persona}.")
    if report.tool_tokens or report.tools_dropped:
        cut = ", ".join(report.tools_dropped)
        lines.append(
            f"Tool definitions: {report.tool_tokens} tokens"
            + (f"; left out to fit: {cut}." if cut else ".")
        )
    if report.knowledge is not None:
        lines.append(knowledge_line(report.knowledge))
    return "\n".join(lines)


def knowledge_line(note: KnowledgeNote) -> str:
    """`Knowledge: [1] rules.md · "Bans", [2] ...; left out for the budget: ...`."""
    shown = ", ".join(f"[{n}] {label}" for n, label in enumerate(note.shown, start=1))
    line = f"Knowledge: {shown or 'nothing shown'}"
    if note.dropped:
        line += "; left out for the budget: " + ", ".join(note.dropped)
    return line + "."


def _component_line(comp: dict[str, Any]) -> str:
    status = comp.get("status", "included")
    detail = f"{comp.get('kept_tokens', comp.get('tokens', 0))} tokens"
    if status == "truncated":
        detail = f"{comp.get('kept_tokens', 0)} of {comp.get('tokens', 0)} tokens"
    elif status == "dropped":
        detail = f"0 of {comp.get('tokens', 0)} tokens"
    return f"  {comp.get('name', '?')}: {status}, {detail}"
