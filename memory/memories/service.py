"""The rules of long-term memory, in one place for chat commands, tool markers and the CLI.

`/memory ...`, the model's `[Remember: ...]`/`[Forget: ...]` markers and `chatterd memory
...` all go through `MemoryService`, so a memory is limited, numbered and deduplicated the
same way whoever writes it:
- a memory is one line of at most MAX_CHARS characters (surrounding space stripped, runs
  of whitespace made one space); an import keeps an exported text as it was, within the
  same limit;
- one person has at most MAX_PER_USER memories; an add or import past that is refused;
- two texts are "the same memory" when they differ only in case and spacing;
- lists are newest first and numbered from 1; "forget 2" means the second of that list.

Refusals raise `MemoryRefused`, whose message is written to be shown as is, to a person or
to the model. Every change writes one audit line (who changed whose memory, and which
row) at INFO; the text of a memory is never logged.

This module only knows the MemoryStore protocol (memory.memories.types), so core may import it
without pulling in SQLAlchemy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.memories.types import MemoryItem, MemoryStore, NewMemory

log = logging.getLogger(__name__)

MAX_CHARS = 500
MAX_PER_USER = 200
IMPORT_AUTHOR = "import"


class MemoryRefused(ValueError):
    """A change the memory rules do not allow; the message says why, fit to show as is."""


@dataclass(frozen=True)
class TextForget:
    """What forget-by-text found: one match is removed; several mean none was."""

    matches: list[MemoryItem]  # newest first
    removed: bool  # the single match was deleted by this call (False: gone meanwhile)


def normalise_memory(content: str) -> str:
    """What counts as "the same memory": case and spacing do not matter."""
    return " ".join(content.split()).casefold()


def numbered_lines(items: Sequence[MemoryItem]) -> list[str]:
    """`1. text` lines: the numbers `forget` takes."""
    return [f"{number}. {item.content}" for number, item in enumerate(items, start=1)]


def _too_long(length: int) -> str:
    return f"{length} characters is over the limit of {MAX_CHARS}"


class MemoryService:
    """Long-term memory with its rules, over any MemoryStore."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    async def numbered(self, platform: str, user_id: str) -> list[MemoryItem]:
        """The person's memories, newest first: item n is the one shown as number n."""
        return await self._store.list_memories(platform, user_id)

    async def add(
        self, platform: str, user_id: str, text: str, *, author: str
    ) -> MemoryItem | None:
        """Remember `text` about the person; None when it is already remembered."""
        fact = " ".join(text.split())
        if not fact:
            raise MemoryRefused("Nothing to remember: the text was empty.")
        if len(fact) > MAX_CHARS:
            raise MemoryRefused(f"Not saved: {_too_long(len(fact))}. Keep memories short.")
        existing = await self._store.list_memories(platform, user_id)
        key = normalise_memory(fact)
        if any(normalise_memory(item.content) == key for item in existing):
            return None
        if len(existing) >= MAX_PER_USER:
            raise MemoryRefused(
                f"Not saved: {MAX_PER_USER} memories is the limit for one person. "
                "Remove some first with /memory forget <n>."
            )
        try:
            item = await self._store.add_memory(platform, user_id, fact, author)
        except ValueError as exc:  # a row the store cannot hold (an over-long id, say)
            raise MemoryRefused(f"Not saved: {exc}.") from exc
        if item is not None:
            log.info("memory #%d added for %s:%s by %s", item.id, platform, user_id, author)
        return item

    async def forget_number(
        self, platform: str, user_id: str, number: int, *, by: str
    ) -> MemoryItem:
        """Forget item `number` of `numbered()`; returns what was forgotten."""
        items = await self.numbered(platform, user_id)
        if not 1 <= number <= len(items):
            raise MemoryRefused(f"There is no item {number}; there are {len(items)} item(s).")
        item = items[number - 1]
        await self._forget(item, by)
        return item

    async def forget_id(
        self, platform: str, user_id: str, memory_id: int, *, by: str
    ) -> MemoryItem:
        """Forget the person's memory with this row id (the console's forget buttons, which
        must not hit another memory if the numbering moved meanwhile)."""
        items = await self.numbered(platform, user_id)
        item = next((found for found in items if found.id == memory_id), None)
        if item is None or not await self._forget(item, by):
            raise MemoryRefused("That memory is already gone.")
        return item

    async def forget_text(self, platform: str, user_id: str, text: str, *, by: str) -> TextForget:
        """Forget the memory that matches `text`: the same memory, else the only one
        containing it (ignoring case and spacing). Several matches forget nothing."""
        needle = normalise_memory(text)
        if not needle:
            raise MemoryRefused("Nothing to forget: the text was empty.")
        items = await self.numbered(platform, user_id)
        exact = [item for item in items if normalise_memory(item.content) == needle]
        matches = exact or [item for item in items if needle in normalise_memory(item.content)]
        removed = len(matches) == 1 and await self._forget(matches[0], by)
        return TextForget(matches, removed)

    async def _forget(self, item: MemoryItem, by: str) -> bool:
        removed = await self._store.delete_memory(item.platform, item.user_id, item.id)
        if removed:
            log.info(
                "memory #%d of %s:%s forgotten by %s", item.id, item.platform, item.user_id, by
            )
        return removed

    async def clear(self, platform: str, user_id: str, *, by: str) -> int:
        """Forget everything about the person; returns how many memories went."""
        removed = await self._store.clear_memories(platform, user_id)
        if removed:
            log.info("%d memories of %s:%s cleared by %s", removed, platform, user_id, by)
        return removed

    async def export_jsonl(self, platform: str, user_id: str) -> list[str]:
        """One JSON object per memory, oldest first: content, author, created_at."""
        items = reversed(await self.numbered(platform, user_id))
        return [
            json.dumps(
                {
                    "content": item.content,
                    "author": item.author,
                    "created_at": item.created_at.isoformat(),
                },
                ensure_ascii=False,
            )
            for item in items
        ]

    async def import_jsonl(
        self, platform: str, user_id: str, lines: Iterable[str], *, by: str
    ) -> int:
        """Add exported memories (blank lines skipped); returns how many were new.

        Every line is checked first, and the total against MAX_PER_USER: one bad line, or
        too many, imports nothing. Memories already there are skipped, not refused.
        """
        rows = [
            _import_row(number, line) for number, line in enumerate(lines, start=1) if line.strip()
        ]
        existing = await self._store.list_memories(platform, user_id)
        keys = {normalise_memory(item.content) for item in existing}
        new = 0
        for row in rows:
            key = normalise_memory(row.content)
            if key not in keys:
                keys.add(key)
                new += 1
        if len(existing) + new > MAX_PER_USER:
            raise MemoryRefused(
                f"Not imported: {len(existing)} memories and {new} new ones would be over the "
                f"limit of {MAX_PER_USER} for one person. Nothing was imported."
            )
        if not new:
            return 0
        try:
            added = await self._store.add_memories(platform, user_id, rows)
        except ValueError as exc:
            raise MemoryRefused(f"Not imported: {exc}.") from exc
        if added:
            log.info("%d memories imported for %s:%s by %s", len(added), platform, user_id, by)
        return len(added)


def _import_row(number: int, line: str) -> NewMemory:
    """One exported line as a NewMemory, or MemoryRefused naming the line and the fault."""
    where = f"line {number}"
    try:
        row: Any = json.loads(line)
    except ValueError:
        raise MemoryRefused(f"{where}: not valid JSON") from None
    if not isinstance(row, dict):
        raise MemoryRefused(f"{where}: expected an object")
    content = row.get("content")
    if not isinstance(content, str):
        raise MemoryRefused(f"{where}: content must be text")
    content = content.strip()
    if not content:
        raise MemoryRefused(f"{where}: content is empty")
    if len(content) > MAX_CHARS:
        raise MemoryRefused(f"{where}: {_too_long(len(content))}")
    author = row.get("author", IMPORT_AUTHOR)
    if not isinstance(author, str) or not author.strip():
        raise MemoryRefused(f"{where}: author must be non-empty text")
    created = row.get("created_at")
    if created is not None:
        if not isinstance(created, str):
            raise MemoryRefused(f"{where}: created_at is not an ISO-8601 time")
        try:
            created = datetime.fromisoformat(created)
        except ValueError:
            raise MemoryRefused(f"{where}: created_at is not an ISO-8601 time") from None
    return NewMemory(content, author.strip(), created)
