"""`chatterd usage [--since DATE] [--by day|user|chat|model|purpose] [--csv]`: tokens spent.

Reads the same counters as `/usage` and the quotas (memory.usage.store), from `--since`
(default: the first day of this month, UTC) through today, grouped one way. The table
is for people; `--csv` is for a spreadsheet or a script (plain integers, one header).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any, TextIO

from bot.cli.stored import opened_store
from bot.config import Settings
from memory.usage.types import GROUP_BY, UsageGroup, UsageTotals

CSV_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "tokens",
    "calls",
    "estimated_calls",
    "cached_tokens",
)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date like 2026-03-01") from None


def add_usage_parser(sub: Any) -> None:
    usage = sub.add_parser(
        "usage", help="tokens spent per day, user, chat or model (the /usage counters)"
    )
    usage.add_argument(
        "--since",
        type=_day,
        metavar="DATE",
        help="first day to count, YYYY-MM-DD in UTC (default: the 1st of this month)",
    )
    usage.add_argument(
        "--by",
        choices=GROUP_BY,
        default="day",
        metavar="day|user|chat|model|purpose",
        help="one line per day (default), user (platform:id), chat (platform:id), model or "
        "purpose (reply, vision, compaction, transcription, speech)",
    )
    usage.add_argument("--csv", action="store_true", help="CSV with a header instead of a table")


async def run_usage_command(
    args: argparse.Namespace, settings: Settings, *, today: date | None = None
) -> int:
    today = today or datetime.now(UTC).date()
    since: date = args.since or today.replace(day=1)
    if since > today:
        print(f"chatterd usage: --since {since} is after today ({today}, UTC)", file=sys.stderr)
        return 2
    async with opened_store(settings) as store:
        groups = await store.usage.grouped(args.by, since, today)
    if args.csv:
        write_csv(sys.stdout, args.by, groups)
    elif not groups:
        print(f"no model calls recorded from {since} to {today} (UTC)")
    else:
        print(f"tokens from {since} to {today} (UTC), by {args.by}:")
        print(table(args.by, groups))
    return 0


def write_csv(out: TextIO, by: str, groups: Sequence[UsageGroup]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([by, *CSV_FIELDS])
    for group in groups:
        writer.writerow([group.key, *_numbers(group.totals)])


def table(by: str, groups: Sequence[UsageGroup]) -> str:
    """Aligned columns with a total line; keys are ids, models and days (no user text)."""
    total = UsageTotals(*(sum(getattr(g.totals, f) for g in groups) for f in _SUMMED))
    rows = [[by, "prompt", "completion", "tokens", "calls", "estimated", "cached", "hit rate"]]
    rows += [[g.key, *_cells(g.totals)] for g in groups]
    rows.append(["total", *_cells(total)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


_SUMMED = ("prompt_tokens", "completion_tokens", "calls", "estimated_calls", "cached_tokens")


def _cells(totals: UsageTotals) -> list[str]:
    return [*(f"{n:,}" for n in _numbers(totals)), f"{totals.hit_rate:.0%}"]


def _numbers(totals: UsageTotals) -> list[int]:
    return [
        totals.prompt_tokens,
        totals.completion_tokens,
        totals.tokens,
        totals.calls,
        totals.estimated_calls,
        totals.cached_tokens,
    ]
