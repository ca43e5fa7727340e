"""Render a turn's context report as the short text `/context` replies with."""

from __future__ import annotations

from typing import Any


def format_report(report: dict[str, Any]) -> str:
    """Components with tokens and status, history kept/dropped, total vs window."""
    exact = "exact" if report.get("exact") else "estimated"
    lines = [
        f"Context of the last turn: {report.get('total_tokens', 0)}"
        f" / {report.get('budget', 0)} tokens "
        f"({exact}, {report.get('tokenizer', '?')}); window {report.get('window', '?')}, "
        f"{report.get('reply_reserve', 0)} kept free for the reply.",
        "System prompt:",
    ]
    for comp in report.get("components", []):
        status = comp.get("status", "included")
        detail = f"{comp.get('kept_tokens', comp.get('tokens', 0))} tokens"
        if status == "truncated":
            detail = f"{comp.get('kept_tokens', 0)} of {comp.get('tokens', 0)} tokens"
        elif status == "dropped":
            detail = f"0 of {comp.get('tokens', 0)} tokens"
        lines.append(f"  {comp.get('name', '?')}: {status}, {detail}")
    history = report.get("history", {})
    kept, dropped = history.get("kept", 0), history.get("dropped", 0)
    line = (
        f"History: {kept} turn(s) kept ({history.get('kept_tokens', 0)} tokens), {dropped} dropped"
    )
    ranges = history.get("dropped_ranges") or []
    if ranges:
        shown = ", ".join(f"#{a}" if a == b else f"#{a}–#{b}" for a, b in ranges[:5])
        line += f" ({shown}{', …' if len(ranges) > 5 else ''})"
    lines.append(line + ".")
    if summary := history.get("summary"):
        lines.append(
            f"Summary: {summary.get('turns', 0)} earlier turn(s) folded into one summary "
            f"(through #{summary.get('through_id', '?')})."
        )
    if report.get("current_tokens") is not None:
        lines.append(f"Current message: {report['current_tokens']} tokens.")
    return "\n".join(lines)
