"""`chatterd memory list|add|forget|clear|export|import --user PLATFORM:ID`.

The same rules and numbering as `/memory` in chat: both go through memory.memories.service.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.cli.stored import opened_store
from bot.commands.table import PLATFORM_ID
from bot.config import Settings
from memory.memories.service import MemoryRefused, MemoryService, numbered_lines

CLI_AUTHOR = "cli"  # the author and the audit log's "by" of changes made here


def _user(value: str) -> tuple[str, str]:
    match = PLATFORM_ID.match(value)
    if not match:
        raise argparse.ArgumentTypeError("expected PLATFORM:ID, e.g. telegram:123 or qq:456")
    return match.group(1), match.group(2)


def add_memory_parser(sub: Any) -> None:
    memory = sub.add_parser("memory", help="manage a user's long-term memory")
    actions = memory.add_subparsers(dest="memory_command", required=True)
    for name, help_text in (
        ("list", "show the user's memories, numbered, newest first"),
        ("add", "add one memory"),
        ("forget", "delete memory number N (as `list` numbers them)"),
        ("clear", "delete all the user's memories"),
        ("export", "write the user's memories as JSON Lines to stdout"),
        ("import", 'read JSON Lines (one {"content": ...} per line) from stdin'),
    ):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--user", required=True, type=_user, help="PLATFORM:ID")
        if name == "add":
            action.add_argument("text", nargs="+")
        if name == "forget":
            action.add_argument("number", type=int)
        if name == "clear":
            action.add_argument("--yes", action="store_true", help="confirm without asking")


async def run_memory_command(args: argparse.Namespace, settings: Settings) -> int:
    platform, user_id = args.user
    async with opened_store(settings) as store:
        try:
            return await _run(args, MemoryService(store), platform, user_id)
        except MemoryRefused as refused:
            print(refused, file=sys.stderr)
            return 1


async def _run(args: argparse.Namespace, memories: MemoryService, platform: str, user: str) -> int:
    command = args.memory_command
    if command == "list":
        items = await memories.numbered(platform, user)
        print("\n".join(numbered_lines(items)) if items else "(no memories)")
    elif command == "add":
        added = await memories.add(platform, user, " ".join(args.text), author=CLI_AUTHOR)
        print("added" if added else "already remembered")
    elif command == "forget":
        item = await memories.forget_number(platform, user, args.number, by=CLI_AUTHOR)
        print(f"forgot: {item.content}")
    elif command == "clear":
        if not args.yes:
            print(
                "refusing without --yes (this deletes every memory of that user)", file=sys.stderr
            )
            return 1
        print(f"cleared {await memories.clear(platform, user, by=CLI_AUTHOR)} item(s)")
    elif command == "export":
        for line in await memories.export_jsonl(platform, user):
            print(line)
    elif command == "import":
        imported = await memories.import_jsonl(platform, user, sys.stdin, by=CLI_AUTHOR)
        print(f"imported {imported} item(s)")
    return 0
