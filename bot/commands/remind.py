"""`/remind` and `/schedule`: set, list and cancel reminders and scheduled model turns.

`/remind <when> <text>` (anyone), `/remind list` (yours in this chat; admins see
everyone's here), `/remind cancel <id>` (yours; admins any). `/schedule <when>
<instruction>` (admins) runs a model turn then. The rules (parsing, limits, who may
cancel) are core/reminders/service.py's, shared with the model's tool, the console and
the CLI; this module only reads the command and words the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.commands.table import text_after
from core.admins import Admins
from core.messages import InboundMessage, Reply
from core.reminders.service import Reminders, list_line
from core.reminders.when import FORMS_HELP
from memory.reminders.types import ReminderRefused

_ID = re.compile(r"^#?(\d{1,18})$")

REMIND_USAGE = "\n".join(
    [
        "Usage: /remind <when> <text> — e.g. /remind tomorrow 09:00 call the bank",
        f"<when>: {FORMS_HELP}",
        "/remind list — your reminders here; /remind cancel <id> — cancel one (12 or #12)",
    ]
)
SCHEDULE_USAGE = (
    "Usage (admins): /schedule <when> <instruction> — at that time I answer the instruction "
    "here as if you had asked, e.g. /schedule every day 08:00 summarise today's news. "
    "/remind list shows it, /remind cancel <id> cancels it."
)


@dataclass(frozen=True)
class RemindCommand:
    """`/remind` and `/schedule` for bot/commands/table.py: (message, args) -> Reply."""

    reminders: Reminders
    admins: Admins

    async def remind(self, message: InboundMessage, args: list[str]) -> Reply:
        return await self._answer(message, args, REMIND_USAGE, "remind")

    async def schedule(self, message: InboundMessage, args: list[str]) -> Reply:
        if not self.admins.here(message):
            return Reply("Only admins can schedule tasks; /remind sets a reminder.")
        return await self._answer(message, args, SCHEDULE_USAGE, "task")

    async def _answer(
        self, message: InboundMessage, args: list[str], usage: str, kind: str
    ) -> Reply:
        """Both commands share list and cancel; anything else sets one of `kind`."""
        sub = args[0].casefold() if args else "help"
        if sub in ("help", "?"):
            return Reply(usage)
        if sub in ("list", "ls"):
            return Reply(await self._list(message))
        if sub in ("cancel", "delete", "rm"):
            return Reply(await self._cancel(message, args[1:]))
        return Reply(await self._set(message, kind))

    async def _set(self, message: InboundMessage, kind: str) -> str:
        try:
            done = await self.reminders.set_from_text(message, text_after(message.text), kind=kind)
        except ReminderRefused as refused:
            return f"Not set: {refused}."
        return done.text

    async def _list(self, message: InboundMessage) -> str:
        admin = self.admins.here(message)
        owner = None if admin else message.sender_id
        found = await self.reminders.listing(message.platform, message.chat_id, owner)
        if not found:
            return "No reminders here." if admin else "You have no reminders in this chat."
        now = self.reminders.now()
        head = "Reminders in this chat:" if admin else "Your reminders in this chat:"
        return "\n".join([head, *(list_line(r, now, show_owner=admin) for r in found)])

    async def _cancel(self, message: InboundMessage, args: list[str]) -> str:
        found = _ID.match(args[0]) if len(args) == 1 else None
        if found is None:
            return "Usage: /remind cancel <id> — the number /remind list shows (12 or #12)"
        return await self.reminders.cancel(
            int(found.group(1)), by=message.sender_key, admin=self.admins.here(message)
        )
