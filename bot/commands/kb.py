"""`/kb`: add, list, remove and search the chat's knowledge base from the chat.

`/kb add` reads the document the message carries or replies to (PDF, DOCX, text), a link
in it or in the replied message, or the replied message's own text; `/kb add <url>`
reads a page; `--global` (admins) adds for every chat. Who may: in a group, `[bot]
admins`, or every member where `[knowledge] group_members_add = true`; in a private
chat, the person, for their own chat. The rules of the knowledge base itself (scopes,
limits, duplicates) are core/knowledge's; this module reads the command and words it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.admins import Admins
from core.knowledge.intake import AddRequest, KnowledgeIntake
from core.knowledge.sources import KnowledgeSources, Unreadable
from core.media.documents import Page
from core.media.links import find_links
from core.media.shared import one_line
from core.messages import ChatType, InboundMessage, Reply
from memory.knowledge.types import GLOBAL_SCOPE, DocumentInfo

Content = str | tuple[Page, ...]
_ID = re.compile(r"^#?(\d{1,18})$")
LIST_MAX = 50

KB_USAGE = "\n".join(
    [
        "The knowledge base: documents I search when you ask me something here.",
        "/kb add — as a reply to (or the caption of) a PDF, DOCX or text file, or to a "
        "message with a link",
        "/kb add <url> — add a web page",
        "/kb add --global ... — (admins) for every chat",
        "/kb list — this chat's documents and the global ones",
        "/kb remove <id> — remove one (12 or #12)",
        "/kb search <question> — the passages I would find, with scores and sources",
    ]
)


class KnowledgeCommands(Protocol):
    """What `/kb` needs from the daemon's knowledge base (bot/wiring/knowledge.py)."""

    @property
    def intake(self) -> KnowledgeIntake: ...

    @property
    def sources(self) -> KnowledgeSources: ...

    async def documents(self, scopes: Sequence[str]) -> list[DocumentInfo]: ...

    async def remove(self, document_id: int, scope: str) -> DocumentInfo | None: ...

    async def search_text(self, scope: str, query: str) -> str: ...


def chat_scope(message: InboundMessage) -> str:
    """The scope of the chat's own documents: "telegram:-100123", "qq:group:5"."""
    return f"{message.platform}:{message.chat_id}"


@dataclass(frozen=True)
class KbCommand:
    """`/kb` for bot/commands/table.py: (message, args) -> Reply."""

    knowledge: KnowledgeCommands
    admins: Admins
    group_members_add: bool = False

    def _may_change(self, message: InboundMessage) -> bool:
        if self.admins.here(message) or message.chat_type is ChatType.PRIVATE:
            return True
        return self.group_members_add

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        sub = args[0].casefold() if args else "help"
        rest = args[1:]
        if sub == "add":
            return Reply(await self._add(message, rest))
        if sub in ("list", "ls"):
            return Reply(await self._list(message))
        if sub in ("remove", "rm", "delete"):
            return Reply(await self._remove(message, rest))
        if sub in ("search", "find"):
            return Reply(await self._search(message, rest))
        return Reply(KB_USAGE)

    async def _add(self, message: InboundMessage, rest: list[str]) -> str:
        is_global = "--global" in rest
        rest = [word for word in rest if word != "--global"]
        admin = self.admins.here(message)
        if is_global and not admin:
            return "Only admins can add documents for every chat (--global)."
        if not self._may_change(message):
            return (
                "Only admins can add documents to this group's knowledge base "
                "([knowledge] group_members_add is off)."
            )
        try:
            found = await self._read(message, rest)
        except Unreadable as why:
            return f"Not added: {why}."
        if found is None:
            return (
                "Nothing to add: send /kb add as a reply to a document or a link, as a "
                "file's caption, or with a URL (/kb add https://...)."
            )
        source, content = found
        scope = GLOBAL_SCOPE if is_global else chat_scope(message)
        request = AddRequest(scope, source, content, added_by=message.sender_key, origin=message)
        return await self.knowledge.intake.add(request)

    async def _read(self, message: InboundMessage, rest: list[str]) -> tuple[str, Content] | None:
        sources = self.knowledge.sources
        urls = find_links(" ".join(rest), 1)
        if urls:
            return await sources.page(urls[0])
        files = [*message.attachments, *message.reply_attachments]
        documents = [a for a in files if a.kind == "document"]
        if documents:
            return await sources.attachment(documents[0])
        if files:
            raise Unreadable("a voice note or audio file is not a document")
        quoted = message.reply_text or ""
        urls = find_links(quoted, 1)
        if urls:
            return await sources.page(urls[0])
        if quoted.strip():
            who = one_line(message.reply_to_sender_id or "someone", 40)
            return f"message from {message.platform}:{who}", quoted
        return None

    async def _list(self, message: InboundMessage) -> str:
        docs = await self.knowledge.documents([chat_scope(message), GLOBAL_SCOPE])
        if not docs:
            return "No documents here yet. /kb add as a reply to a document adds one."
        lines = ["Documents I search here:"]
        for doc in docs[-LIST_MAX:]:
            where = " (global)" if doc.scope == GLOBAL_SCOPE else ""
            state = f", {doc.state}" if doc.state != "ready" else ""
            error = f": {doc.error}" if doc.error else ""
            lines.append(
                f"#{doc.id} {one_line(doc.source, 80)}{where} — {doc.chunk_count} passage(s), "
                f"{_kb(doc.size_bytes)}{state}{error}"
            )
        if len(docs) > LIST_MAX:
            lines.append(f"(the newest {LIST_MAX} of {len(docs)})")
        return "\n".join(lines)

    async def _remove(self, message: InboundMessage, rest: list[str]) -> str:
        found = _ID.match(rest[0]) if len(rest) == 1 else None
        if found is None:
            return "Usage: /kb remove <id> — the number /kb list shows (12 or #12)"
        if not self._may_change(message):
            return "Only admins can remove documents from this group's knowledge base."
        doc_id = int(found.group(1))
        gone = await self.knowledge.remove(doc_id, chat_scope(message))
        if gone is None and self.admins.here(message):
            gone = await self.knowledge.remove(doc_id, GLOBAL_SCOPE)
        if gone is None:
            return f"There is no document #{doc_id} in this chat's knowledge base."
        return f"Removed #{gone.id} {one_line(gone.source, 80)}."

    async def _search(self, message: InboundMessage, rest: list[str]) -> str:
        query = " ".join(rest).strip()
        if not query:
            return "Usage: /kb search <question>"
        found = await self.knowledge.search_text(chat_scope(message), query)
        if not found:
            return "No passage in this chat's (or the global) documents matches."
        return "Passages I would find (fused score; keyword and meaning ranks):\n" + found


def _kb(size: int) -> str:
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} B"
