"""`chatterd kb add|list|remove|search`: the knowledge base from the shell.

For the operator at the machine: the same knowledge base, rules and intake as `/kb`
(bot/wiring/knowledge.py), with the scope named: `--chat platform:chat_id` or `--global`.
Files are parsed in the same sandbox as documents people share; URLs go through the safe
fetcher of `[links]`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.config import Settings

if TYPE_CHECKING:
    from bot.wiring.knowledge import DaemonKnowledge

CHAT = re.compile(r"^(telegram|qq|http|console):(\S+)$")
OPERATOR = "cli"


def _scope(text: str) -> str:
    if CHAT.match(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not platform:chat_id (e.g. qq:group:123)")
    return text


def _where(parser: Any, *, required: bool) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--chat", type=_scope, metavar="PLATFORM:CHAT_ID", help="this chat's")
    group.add_argument("--global", dest="everyone", action="store_true", help="every chat's")


def add_kb_parser(sub: Any) -> None:
    kb = sub.add_parser("kb", help="the knowledge base (/kb)")
    actions = kb.add_subparsers(dest="kb_command", required=True)
    add = actions.add_parser("add", help="add a file (PDF, DOCX, text) or a web page")
    add.add_argument("source", help="a file path or an http(s) URL")
    add.add_argument("--name", help="the name shown in citations (default: the file's)")
    _where(add, required=True)
    listing = actions.add_parser("list", help="a chat's documents and the global ones")
    _where(listing, required=True)
    remove = actions.add_parser("remove", help="remove a document by its id")
    remove.add_argument("id", help="the id `kb list` shows (12 or #12)")
    _where(remove, required=True)
    search = actions.add_parser("search", help="the passages a question finds, with scores")
    search.add_argument("query", nargs="+", help="the question or keywords")
    _where(search, required=True)


async def run_kb_command(args: argparse.Namespace, settings: Settings) -> int:
    from bot.wiring.knowledge import DaemonKnowledge, build_knowledge
    from bot.wiring.shared_media import link_policy
    from core.media.fetch import SafeDownloader
    from core.media.links import PageReader
    from core.media.sandbox import ParseSandbox
    from memory.knowledge.types import GLOBAL_SCOPE
    from memory.turns.store import open_storage

    scope: str = GLOBAL_SCOPE if args.everyone else args.chat
    store = await open_storage(settings.storage.url)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(store.close)
        sandbox = ParseSandbox()
        stack.push_async_callback(sandbox.close)
        policy = link_policy(settings)
        knowledge = build_knowledge(
            settings.knowledge.model_copy(update={"enabled": True}),
            store.database,
            stack,
            sandbox=sandbox,
            pages=PageReader(SafeDownloader(policy), sandbox=sandbox),
            max_file_bytes=settings.documents.max_bytes,
        )
        assert isinstance(knowledge, DaemonKnowledge)
        return await _run(args, knowledge, scope)


async def _run(args: argparse.Namespace, knowledge: DaemonKnowledge, scope: str) -> int:
    from bot.commands.kb import Content
    from core.knowledge.intake import AddRequest
    from core.knowledge.sources import Unreadable
    from core.messages import Attachment
    from memory.knowledge.types import GLOBAL_SCOPE

    if args.kb_command == "add":
        try:
            found: tuple[str, Content] = await _read(args.source, knowledge.sources, Attachment)
        except (Unreadable, OSError) as why:
            print(f"chatterd kb: not added: {why}", file=sys.stderr)
            return 1
        source, content = found
        line = await knowledge.intake.add(
            AddRequest(scope, args.name or source, content, added_by=OPERATOR)
        )
        await knowledge.settle()
        print(line)
        return 0 if line.startswith(("Added", "Already")) else 1
    if args.kb_command == "list":
        docs = await knowledge.documents(sorted({scope, GLOBAL_SCOPE}))
        for doc in docs:
            error = f" ({doc.error})" if doc.error else ""
            print(
                f"#{doc.id}  {doc.scope}  {doc.source}  {doc.state}{error}  "
                f"{doc.chunk_count} passages  {doc.size_bytes} bytes  by {doc.added_by or '?'}"
            )
        if not docs:
            print("no documents")
        return 0
    if args.kb_command == "remove":
        number = args.id.lstrip("#")
        if not number.isdigit():
            print(f"chatterd kb: {args.id!r} is not a document id", file=sys.stderr)
            return 2
        gone = await knowledge.remove(int(number), scope)
        if gone is None:
            print(f"chatterd kb: no document #{number} in {scope}", file=sys.stderr)
            return 1
        print(f"removed #{gone.id} {gone.source} from {scope}")
        return 0
    found_text = await knowledge.search_text(scope, " ".join(args.query))
    print(found_text or "no passage matches")
    return 0


async def _read(source: str, sources: Any, attachment: Any) -> Any:
    if re.match(r"^https?://", source, re.IGNORECASE):
        return await sources.page(source)
    path = Path(source)
    data = await asyncio.to_thread(path.read_bytes)

    async def fetch() -> bytes:
        return data

    return await sources.attachment(
        attachment(kind="document", fetch=fetch, name=path.name, size=len(data))
    )
