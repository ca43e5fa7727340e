"""The context picture: one chat's last context as parts of the model's window.

The same `ContextReport` that `/context` prints, cut into segments that add up: every
system component kept (the summary among them), the framing the chat format adds, the
history kept, the current message, then the reply reserve and the free space. The parts
inside the context add up to the report's `total_tokens` exactly (any framing the
report does not name is one "framing" segment), and all of them to the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from bot.console.charts import Segment, stacked_bar
from core.context.compaction import SUMMARY_COMPONENT
from core.context.report import ContextReport


@dataclass(frozen=True)
class ComponentLine:
    name: str
    status: str  # included | truncated | dropped
    tokens: int  # asked for
    kept: int


@dataclass(frozen=True)
class Picture:
    report: ContextReport
    segments: list[Segment]  # left to right, inside the context first
    in_context: int  # the sum of the context's segments: equals report.total_tokens
    components: list[ComponentLine]
    dropped: list[str]  # "#12–#40" spans of history that fell out


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def picture_of(report: ContextReport) -> Picture:
    segments: list[Segment] = []
    lines: list[ComponentLine] = []
    kept_system = 0
    for index, comp in enumerate(report.components):
        name = str(comp.get("name", "?"))
        kept = _int(comp.get("kept_tokens", comp.get("tokens", 0)))
        status = str(comp.get("status", "included"))
        lines.append(ComponentLine(name, status, _int(comp.get("tokens", 0)), kept))
        kept_system += kept
        if kept <= 0:
            continue
        key = "summary" if name == SUMMARY_COMPONENT else f"system{index % 4}"
        label = f"{name} (truncated)" if status == "truncated" else name
        segments.append(Segment(key, label, kept))
    history = Segment(
        "history", f"history: {report.history_kept} turn(s) kept", report.history_tokens
    )
    current = Segment("current", "current message", report.current_tokens)
    named = kept_system + report.history_tokens + report.current_tokens
    framing = report.total_tokens - named  # the chat format's own tokens
    if framing:
        segments.append(Segment("framing", "message framing", framing))
    segments += [history, current]
    in_context = sum(s.tokens for s in segments)
    segments.append(Segment("reserve", "kept free for the reply", report.reply_reserve))
    free = report.budget - report.total_tokens
    if free > 0:
        segments.append(Segment("free", "free", free))
    dropped = [f"#{a}" if a == b else f"#{a}–#{b}" for a, b in report.dropped_ranges]
    return Picture(report, segments, in_context, lines, dropped)


@dataclass(frozen=True)
class DrawnPicture:
    """A picture and its two bars: the whole window, and the context alone, enlarged."""

    picture: Picture
    bar: Markup
    zoom: Markup


def drawn_picture(report: ContextReport) -> DrawnPicture:
    picture = picture_of(report)
    inside = [s for s in picture.segments if s.key not in ("reserve", "free")]
    return DrawnPicture(
        picture,
        bar=stacked_bar(picture.segments, title="The last context, as parts of the window"),
        zoom=stacked_bar(inside, title="The last context alone", css="picture zoom"),
    )


def was_dropped(turn_id: int, report: ContextReport | None) -> bool:
    """The stored turn fell out of the chat's last context: it lies in a dropped span
    (spans are in the chat's own history order, which is id order)."""
    if report is None:
        return False
    return any(
        isinstance(first, int) and isinstance(last, int) and first <= turn_id <= last
        for first, last in report.dropped_ranges
    )
