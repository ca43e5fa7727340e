"""Chat commands: /help, /reset, /context, /memory. Same behaviour on every channel.

Commands never reach the model and are not stored as history. Permission is checked
here and in each command, all asking the one admin decision (core/admins.py).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from core.admins import Admins
from core.context.report import ContextReport, format_report
from core.messages import ChatType, InboundMessage, Reply
from memory.chats.types import person_key
from memory.memories.service import MemoryRefused, MemoryService, numbered_lines
from memory.memories.types import MemoryStore
from memory.turns.types import TurnStore

# An id never starts with "/", so a URL such as http://example.org is text, not a user.
PLATFORM_ID = re.compile(r"^(telegram|qq|http|console):([^\s/]\S*)$")
MENTION = re.compile(r"^@(\S.*)$")
NAME_LOOKBACK_TURNS = 500


def text_after(text: str, words: int = 1) -> str:
    """What follows a command's first `words` words (`/cmd[@bot]`, then a subcommand such
    as `persona`), as typed: a persona or a reminder is free text, so newlines and inner
    spacing are kept."""
    found = re.match(r"^\s*/\S+" + r"\s+\S+" * (words - 1) + r"[ \t]*(.*)$", text, re.DOTALL)
    return found.group(1).strip() if found else ""


class CommandStore(TurnStore, MemoryStore, Protocol):
    pass


ReportSource = Callable[[str, str], ContextReport | None]  # (platform, chat_id)
Handler = Callable[[InboundMessage, list[str]], Awaitable[Reply]]


@dataclass(frozen=True)
class Target:
    platform: str
    user_id: str
    label: str


class Commands:
    """Parses and runs one command message; returns the reply for the same chat."""

    def __init__(
        self,
        *,
        store: CommandStore,
        admins: Admins,
        bot_name: str,
        context_report: ReportSource,
        bot_control: Handler | None = None,
        usage: Handler | None = None,
        tools: Handler | None = None,
    ) -> None:
        """`bot_control` is `/bot` (bot/commands/admin.py), when the daemon has chat settings;
        `usage` is `/usage` (bot/commands/usage.py), when it meters model calls."""
        self._store = store
        self._memories = MemoryService(store)
        self._admins = admins
        self._bot_name = bot_name
        self._report = context_report
        self._handlers: dict[str, Handler] = {
            "help": self._help,
            "start": self._help,
            "reset": self._reset,
            "context": self._context,
            "memory": self._memory,
        }
        if bot_control is not None:
            self._handlers["bot"] = bot_control
        if usage is not None:  # /usage (bot/commands/usage.py), when the daemon meters
            self._handlers["usage"] = usage
        if tools is not None:  # /tools (bot/commands/tools.py): MCP tools per sender
            self._handlers["tools"] = tools

    @property
    def names(self) -> list[str]:
        known = (
            "help",
            "reset",
            "context",
            "memory",
            "bot",
            "usage",
            "tools",
            "remind",
            "schedule",
            "jobs",
            "draw",
            "kb",
            "digest",
            "sub",
        )
        return [name for name in known if name in self._handlers]

    def add(self, name: str, handler: Handler) -> None:
        """One more command (e.g. /remind from bot/commands/remind.py)."""
        self._handlers[name] = handler

    async def handle(self, message: InboundMessage) -> Reply:
        name, args = parse_command(message.text)
        handler = self._handlers.get(name)
        if handler is None:
            return Reply(f"Unknown command /{name}. Send /help to see what I can do.")
        return await handler(message, args)

    async def _help(self, message: InboundMessage, args: list[str]) -> Reply:
        usage = "usage" in self._handlers
        tools = "tools" in self._handlers
        lines = [
            f"I'm {self._bot_name}, a chat assistant. In groups, mention me, reply to me or "
            "say my name; in a private chat just talk.",
            "",
            "/memory — what I remember about you (numbered)",
            "/memory add <text> — remember something",
            "/memory forget <n> — forget item n",
            "/memory clear — forget everything about you (asks to confirm)",
            "/reset — clear our private chat's history (memories stay)",
            "/context — what my last answer in this chat was built from",
            *(["/usage — the tokens you used today and this month"] if usage else []),
            *(["/tools — the tools from services I can use for you"] if tools else []),
            *(
                ["/remind <when> <text> — a reminder; /remind list, /remind cancel <id>"]
                if "remind" in self._handlers
                else []
            ),
            *(
                ["/draw <what> — a picture, sent when it is drawn"]
                if "draw" in self._handlers
                else []
            ),
            *(
                ["/kb — the documents I search here: /kb add, list, remove, search"]
                if "kb" in self._handlers
                else []
            ),
            *(["/sub list — the feeds this chat follows"] if "sub" in self._handlers else []),
            *(
                ["/jobs — your work that takes minutes here; /jobs cancel <id>"]
                if "jobs" in self._handlers
                else []
            ),
            "/help — this list",
        ]
        if self._admins.here(message):
            lines += [
                "",
                "Admin: /memory show|add|forget|clear with @name, platform:id, or as a reply "
                "to the person's message; /reset in a group clears its history; "
                "/context platform:chat_id.",
            ]
            if "bot" in self._handlers:
                lines.append(
                    "Admin, for this chat: /bot status|on|off|allow|deny|chime, "
                    "/bot persona <text>, /bot wake <word> (-<word> removes), "
                    "/bot reset-settings; /bot alone explains."
                )
            if usage:
                lines.append("Admin: /usage group (this chat's tokens), /usage top (top spenders).")
            if "schedule" in self._handlers:
                lines.append("Admin: /schedule <when> <instruction> — a model turn at that time.")
            if "digest" in self._handlers:
                lines.append("Admin: /digest — what the group said; /digest daily HH:MM, off.")
            if "sub" in self._handlers:
                lines.append("Admin: /sub add <url> — follow a feed here; /sub remove <id>.")
        return Reply("\n".join(lines))

    async def _reset(self, message: InboundMessage, args: list[str]) -> Reply:
        if message.chat_type is ChatType.GROUP and not self._admins.here(message):
            return Reply(
                "Only an admin can reset a group's history. In a private chat, /reset clears ours."
            )
        removed = await self._store.clear_history(message.platform, message.chat_id)
        where = "this group's" if message.chat_type is ChatType.GROUP else "our"
        return Reply(f"Done: cleared {where} chat history ({removed} messages). Memories are kept.")

    async def _context(self, message: InboundMessage, args: list[str]) -> Reply:
        platform, chat_id = message.platform, message.chat_id
        if args:
            named = PLATFORM_ID.match(args[0])
            if not named:
                return Reply("Usage: /context, or (admins) /context platform:chat_id")
            if not self._admins.here(message):
                return Reply("Only admins can look at another chat's context.")
            platform, chat_id = named.group(1), named.group(2)
        report = self._report(platform, chat_id)
        if report is None:
            return Reply("No answered turn in that chat since I started, so nothing to report yet.")
        return Reply(
            format_report(report), private=message.chat_type is ChatType.GROUP and bool(args)
        )

    async def _memory(self, message: InboundMessage, args: list[str]) -> Reply:
        sub = args[0].casefold() if args else "show"
        rest = args[1:] if args else []
        if sub not in {"show", "list", "add", "forget", "delete", "clear"}:
            rest, sub = args, "show"
        target, rest, refusal = await self._target(message, rest)
        if refusal:
            return Reply(refusal)
        assert target is not None
        if sub in {"show", "list"}:
            return await self._memory_show(message, target)
        if sub == "add":
            return await self._memory_add(message, target, " ".join(rest))
        if sub in {"forget", "delete"}:
            return await self._memory_forget(message, target, rest)
        return await self._memory_clear(message, target, rest)

    async def _memory_show(self, message: InboundMessage, target: Target) -> Reply:
        items = await self._memories.numbered(target.platform, target.user_id)
        own = target.label == "you"
        if not items:
            text = (
                "I don't remember anything about you yet."
                if own
                else f"No memories for {target.label}."
            )
        else:
            head = "What I remember about you:" if own else f"Memories of {target.label}:"
            text = "\n".join([head, *numbered_lines(items)])
        return Reply(text, private=message.chat_type is ChatType.GROUP)

    async def _memory_add(self, message: InboundMessage, target: Target, text: str) -> Reply:
        if not text.strip():
            return Reply("Usage: /memory add <text>")
        try:
            added = await self._memories.add(
                target.platform, target.user_id, text, author=message.sender_key
            )
        except MemoryRefused as refused:
            return Reply(str(refused))
        if added is None:
            return Reply("I already remember that.")
        return Reply(
            "Got it, I'll remember that." if target.label == "you" else f"Saved for {target.label}."
        )

    async def _memory_forget(
        self, message: InboundMessage, target: Target, rest: list[str]
    ) -> Reply:
        if len(rest) != 1 or not rest[0].isdigit() or int(rest[0]) < 1:
            return Reply("Usage: /memory forget <n> — n is the number shown by /memory")
        try:
            item = await self._memories.forget_number(
                target.platform, target.user_id, int(rest[0]), by=message.sender_key
            )
        except MemoryRefused as refused:
            return Reply(str(refused))
        return Reply(f"Forgotten: {shorten(item.content)}")

    async def _memory_clear(
        self, message: InboundMessage, target: Target, rest: list[str]
    ) -> Reply:
        if [word.casefold() for word in rest] != ["confirm"]:
            whose = (
                "everything I remember about you"
                if target.label == "you"
                else f"all memories of {target.label}"
            )
            suffix = "" if target.label == "you" else f" {target.label}"
            return Reply(f"This deletes {whose}. To go ahead, send: /memory clear{suffix} confirm")
        removed = await self._memories.clear(target.platform, target.user_id, by=message.sender_key)
        return Reply(f"Done: forgot {removed} item(s).")

    async def _target(
        self, message: InboundMessage, rest: list[str]
    ) -> tuple[Target | None, list[str], str]:
        """Whose memory: yours, unless an admin names someone (or replies to them)."""
        named: Target | None = None
        if rest and (match := PLATFORM_ID.match(rest[0])):
            named = Target(match.group(1), match.group(2), rest[0])
            rest = rest[1:]
        elif rest and (match := MENTION.match(rest[0])):
            named = await self._by_name(message, match.group(1))
            if named is None:
                return None, rest, f"I don't know anyone called @{match.group(1)} in this chat."
            rest = rest[1:]
        elif message.reply_to_sender_id and message.reply_to_sender_id != message.sender_id:
            named = Target(
                message.platform,
                message.reply_to_sender_id,
                person_key(message.platform, message.reply_to_sender_id),
            )
        if named is None or (named.platform, named.user_id) == (
            message.platform,
            message.sender_id,
        ):
            return Target(message.platform, message.sender_id, "you"), rest, ""
        if not self._admins.here(message):
            return None, rest, "Only admins can manage someone else's memory."
        return named, rest, ""

    async def _by_name(self, message: InboundMessage, name: str) -> Target | None:
        wanted = name.casefold()
        turns = await self._store.recent_turns(
            message.platform, message.chat_id, NAME_LOOKBACK_TURNS
        )
        for turn in reversed(turns):
            if turn.sender_id and turn.sender_name and turn.sender_name.casefold() == wanted:
                return Target(turn.platform, turn.sender_id, f"@{turn.sender_name}")
        return None


def parse_command(text: str) -> tuple[str, list[str]]:
    """`/Memory   add  x y` -> ("memory", ["add", "x", "y"]); any whitespace, any script."""
    head, *args = text.strip().split()
    return head[1:].split("@", 1)[0].casefold(), args


def shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
