"""What the subcommands that read the database share: the store, opened for one command
and closed after it, and the `cancel <id>` action with the id as people type it.

Why one place: `memory`, `turns`, `usage`, `reminders` and `jobs` open and close the
store the same way, and `reminders` and `jobs` read `12` or `#12` the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.config import Settings

if TYPE_CHECKING:
    from memory.turns.store import SqlStorage


@asynccontextmanager
async def opened_store(settings: Settings) -> AsyncIterator[SqlStorage]:
    """The configured storage for one command, closed when the block ends."""
    from memory.turns.store import open_storage  # lazy: `chatterd --help` loads no database code

    store = await open_storage(settings.storage.url)
    try:
        yield store
    finally:
        await store.close()


def add_cancel_parser(actions: Any, help_text: str, *, listed_by: str) -> None:
    """`<family> cancel <id>`: the id as `listed_by` (a chat command) shows it."""
    cancel = actions.add_parser("cancel", help=help_text)
    cancel.add_argument("id", help=f"the id {listed_by} shows (12 or #12)")


def typed_id(text: str) -> int | None:
    """An id as people type it, `12` or `#12`; None when it is not one."""
    number = text.lstrip("#")
    return int(number) if number.isdigit() else None
