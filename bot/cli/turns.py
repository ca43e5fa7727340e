"""`chatterd turns list [--state STATE] [--limit N]`: the accepted messages and their states."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any, get_args

from bot.cli.stored import opened_store
from bot.config import Settings
from memory.turns.types import IntakeEntry, TurnState

STATES = get_args(TurnState)
TEXT_CHARS = 60  # enough to recognise a message; the database has the rest


def add_turns_parser(sub: Any) -> None:
    turns = sub.add_parser("turns", help="accepted messages and how far each answer got")
    listing = turns.add_subparsers(dest="turns_command", required=True).add_parser(
        "list", help="newest first: id, state, age, attempts, chat, sender, text"
    )
    listing.add_argument(
        "--state", choices=STATES, metavar="STATE", help=f"only this state: {', '.join(STATES)}"
    )
    listing.add_argument("--limit", type=int, default=50, help="rows at most (default 50)")


async def run_turns_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        print("chatterd turns list: --limit must be at least 1")
        return 2
    async with opened_store(settings) as store:
        entries = await store.intake.listing(args.state, limit=args.limit)
    if not entries:
        print("no accepted messages" + (f" in state {args.state}" if args.state else ""))
        return 0
    now = datetime.now(UTC)
    for entry in entries:
        print(describe(entry, now))
    return 0


def describe(entry: IntakeEntry, now: datetime) -> str:
    """One line; the text is cut and kept on one line (it is user input)."""
    age = int((now - entry.received_at).total_seconds())
    text = " ".join(entry.text.split())
    if len(text) > TEXT_CHARS:
        text = text[: TEXT_CHARS - 1] + "…"
    return (
        f"#{entry.id} {entry.state:<9} {age:>6}s ago  attempts={entry.attempts}  "
        f"{entry.chat_key}  from {entry.platform}:{entry.sender_id}  {text!r}"
    )
