"""How times and numbers read on the console's pages."""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(moment: datetime | None) -> str:
    """`2026-11-24 10:15 UTC`; a dash for never."""
    if moment is None:
        return "—"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def format_age(moment: datetime | None, now: datetime) -> str:
    """`3 min ago`, `2 h ago`, `5 d ago`; `just now` under a minute."""
    if moment is None:
        return "never"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = max(0.0, (now - moment).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"
