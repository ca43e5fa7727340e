"""`chatterd reminders list [--chat platform:chat_id] [--all]` and `chatterd reminders cancel <id>`.

For the operator at the machine: the same rows `/remind list` reads (memory/reminders/store.py),
every chat at once, and cancelling any of them, as an admin would in the chat.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime
from typing import Any

from bot.cli.stored import add_cancel_parser, opened_store, typed_id
from bot.config import Settings
from core.reminders.service import list_line
from memory.chats.types import ChatKey

CHAT = re.compile(r"^(telegram|qq|http|console):(\S+)$")
OPERATOR = "cli"


def _chat(text: str) -> ChatKey:
    if CHAT.match(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not platform:chat_id (e.g. qq:group:123)")
    return ChatKey.parse(text)


def add_reminders_parser(sub: Any) -> None:
    reminders = sub.add_parser("reminders", help="reminders and scheduled tasks (/remind)")
    actions = reminders.add_subparsers(dest="reminders_command", required=True)
    listing = actions.add_parser("list", help="active and missed reminders, oldest first")
    listing.add_argument("--chat", type=_chat, metavar="PLATFORM:CHAT_ID", help="only this chat")
    listing.add_argument(
        "--all", action="store_true", help="also finished and cancelled ones (the newest 200)"
    )
    add_cancel_parser(actions, "cancel a reminder by its id", listed_by="/remind list")


async def run_reminders_command(args: argparse.Namespace, settings: Settings) -> int:
    async with opened_store(settings) as store:
        if args.reminders_command == "cancel":
            number = typed_id(args.id)
            if number is None:
                print(f"chatterd reminders: {args.id!r} is not a reminder id", file=sys.stderr)
                return 2
            found = await store.reminders.get(number)
            if found is None or not await store.reminders.cancel(number, by=OPERATOR):
                print(f"chatterd reminders: no active reminder #{number}", file=sys.stderr)
                return 1
            print(f"cancelled #{number} in {found.chat_key}: {found.text}")
            return 0
        chat: ChatKey | None = args.chat
        states = ("active", "missed", "done", "cancelled") if args.all else ("active", "missed")
        found_all = await store.reminders.listing(
            platform=chat.platform if chat else None,
            chat_id=chat.chat_id if chat else None,
            states=states,
            limit=200,
        )
    if not found_all:
        print("no reminders")
        return 0
    now = datetime.now(UTC)
    for reminder in found_all:
        if reminder.state in ("active", "missed"):
            line = list_line(reminder, now, show_owner=True)
        else:
            line = f"#{reminder.id} {reminder.state} ({reminder.rule}): {reminder.text}"
        print(f"{reminder.chat_key}  {line}")
    return 0
