"""Where the bot serves: the `[access]` rules and a chat's stored settings, per message.

Why one pure function of its inputs: the gate asks it on every message, `/bot status`
asks it to explain a chat, a reminder asks it before it goes out, and the console shows
the same answer, so the rule must live in one place and be testable without a database.
The caller passes the chat's settings in (memory/chats/settings.py, read through a short
cache); bot/wiring/gate.py builds the rules from the config.

The rules, in order:
1. The console (the operator at their own terminal) is always served.
2. An admin's command is always served, anywhere: that is how an admin opens a group.
3. A blocked user is ignored everywhere (admins cannot be blocked).
4. Private chats: admins always; otherwise `[access] private` says all, allowlist
   (`allowed_users`) or off.
5. Groups: `/bot allow` / `/bot deny` (stored) decide when set; otherwise `[access]
   groups` says all, or only `allowed_groups`. An allowed group switched off with
   `/bot off` is ignored too until `/bot on`.

Ignored means no answer and nothing stored, not even as group context: a group allowed
later starts with a clean slate, and a group switched off is not listened to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from core.admins import Admins
from core.messages import ChatType, InboundMessage
from core.tools.mcp.permission import Decision
from memory.chats.types import ChatKey


class ChatRules(Protocol):
    """What policy reads of a chat's stored settings (memory.chats.settings.ChatSettings,
    known here only by this shape, so the gate loads no storage)."""

    @property
    def chat_key(self) -> ChatKey: ...

    @property
    def enabled(self) -> bool: ...  # False: `/bot off`

    @property
    def allowed(self) -> bool | None: ...  # `/bot allow|deny`; None: `[access]` decides

    @property
    def wake_words(self) -> tuple[str, ...]: ...  # `/bot wake`: this group's own

    @property
    def chime(self) -> str | None: ...  # `/bot chime`; None: `[groups] chime_in`


@dataclass(frozen=True)
class NothingSet:
    """A chat with no settings of its own (every private chat): a stored chat's defaults."""

    chat_key: ChatKey
    enabled: bool = True
    allowed: bool | None = None
    wake_words: tuple[str, ...] = ()
    chime: str | None = None


@dataclass(frozen=True)
class AccessRules:
    """`[access]` with the admin decision: chats as ChatKeys, people as `platform:id` keys."""

    groups: Literal["all", "allowlist"] = "all"
    allowed_groups: frozenset[ChatKey] = frozenset()
    blocked_users: frozenset[str] = frozenset()
    private: Literal["all", "allowlist", "off"] = "all"
    allowed_users: frozenset[str] = frozenset()
    admins: Admins = Admins()

    def group(self, here: ChatRules) -> Decision:
        """Is this group on the list? `/bot allow|deny` first, then the config."""
        if here.allowed is True:
            return Decision(True, "allowed by /bot allow")
        if here.allowed is False:
            return Decision(False, "denied by /bot deny")
        if self.groups == "all":
            return Decision(True, '[access] groups = "all"')
        if here.chat_key in self.allowed_groups:
            return Decision(True, "listed in [access] allowed_groups")
        return Decision(False, "not in [access] allowed_groups")

    def private_chat(self, message: InboundMessage) -> Decision:
        """A private chat, by its sender (admins always)."""
        if self.admins.here(message):
            return Decision(True, "an admin")
        if self.private == "all":
            return Decision(True, '[access] private = "all"')
        if self.private == "allowlist" and message.sender_key in self.allowed_users:
            return Decision(True, "listed in [access] allowed_users")
        if self.private == "allowlist":
            return Decision(False, "not in [access] allowed_users")
        return Decision(False, '[access] private = "off"')

    def admit(self, message: InboundMessage, here: ChatRules, *, command: bool) -> Decision:
        """Serve this message? `here` is its chat's settings (the defaults if none)."""
        if self.admins.operator(message):
            return Decision(True, "the console")
        admin = self.admins.here(message)
        if admin and command:
            return Decision(True, "an admin's command")
        if not admin and message.sender_key in self.blocked_users:
            return Decision(False, "sender in [access] blocked_users")
        if message.chat_type is ChatType.PRIVATE:
            return self.private_chat(message)
        group = self.group(here)
        if group.allowed and not here.enabled:
            return Decision(False, "switched off by /bot off")
        return group
