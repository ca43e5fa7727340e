"""`/sub`: the feeds this chat follows. `/sub add <url>` and `/sub remove <id>` (admins),
`/sub list` (anyone). The rules are core/feeds/service.py's; this module reads the command
and answers in one line."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.admins import Admins
from core.feeds.service import Feeds
from core.messages import InboundMessage, Reply

_ID = re.compile(r"^#?(\d{1,18})$")
USAGE = (
    "Usage: /sub list — the feeds this chat follows; /sub add <url> — follow an RSS, Atom "
    "or JSON Feed here (admins); /sub remove <id> — stop (admins)."
)


@dataclass(frozen=True)
class SubCommand:
    """`/sub` for bot/commands/table.py: (message, args) -> Reply."""

    feeds: Feeds
    admins: Admins

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        sub = args[0].casefold() if args else "list"
        if sub in ("list", "ls"):
            return Reply(await self.feeds.listing(message.platform, message.chat_id))
        if sub not in ("add", "remove", "rm", "delete"):
            return Reply(USAGE)
        if not self.admins.here(message):
            return Reply("Only admins can add or remove feeds; /sub list shows them.")
        if sub == "add":
            if len(args) != 2:
                return Reply("Usage: /sub add <url> — e.g. /sub add https://example.org/feed.xml")
            return Reply(await self.feeds.add(message, args[1]))
        found = _ID.match(args[1]) if len(args) == 2 else None
        if found is None:
            return Reply("Usage: /sub remove <id> — the number /sub list shows (3 or #3)")
        return Reply(
            await self.feeds.remove(message.platform, message.chat_id, int(found.group(1)))
        )
