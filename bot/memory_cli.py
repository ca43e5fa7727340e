"""`chatterd memory list|add|forget|clear|export|import --user PLATFORM:ID`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bot.commands import PLATFORM_ID, numbered
from bot.config import Settings


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
    from memory.store import open_storage

    platform, user_id = args.user
    store = await open_storage(settings.storage.url)
    try:
        command = args.memory_command
        if command == "list":
            items = await store.list_memories(platform, user_id)
            print("\n".join(numbered(items)) if items else "(no memories)")
        elif command == "add":
            added = await store.add_memory(platform, user_id, " ".join(args.text), author="cli")
            print("added" if added else "already remembered")
        elif command == "forget":
            items = await store.list_memories(platform, user_id)
            if not 1 <= args.number <= len(items):
                print(f"no item {args.number}; there are {len(items)}", file=sys.stderr)
                return 1
            await store.delete_memory(platform, user_id, items[args.number - 1].id)
            print(f"forgot: {items[args.number - 1].content}")
        elif command == "clear":
            if not args.yes:
                print(
                    "refusing without --yes (this deletes every memory of that user)",
                    file=sys.stderr,
                )
                return 1
            print(f"cleared {await store.clear_memories(platform, user_id)} item(s)")
        elif command == "export":
            async for row in store.export_memories(platform, user_id):
                print(json.dumps(row, ensure_ascii=False))
        elif command == "import":
            rows = [json.loads(line) for line in sys.stdin if line.strip()]
            print(f"imported {await store.import_memories(platform, user_id, rows)} item(s)")
        return 0
    finally:
        await store.close()
