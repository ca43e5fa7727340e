"""Where the bot serves: the `[access]` rules and a chat's stored settings, per message.

Why one pure function of its inputs: the dispatcher asks it on every message, `/bot
status` asks it to explain a chat, and the console shows the same answer, so the rule
must live in one place and be testable without a database. The caller passes the
chat's settings in (memory/chats/settings.py, read through a short cache).

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
from typing import Literal

from bot.config import Settings
from channels.http.chat_ids import GROUP, stored_group_id
from core.messages import ChatType, InboundMessage
from core.tools.mcp.permission import Decision
from memory.chats.settings import ChatSettings
from memory.chats.types import ChatKey

# The operator at their own terminal (`chatterd chat`): never restricted.
EXEMPT_PLATFORMS = frozenset({"console"})


@dataclass(frozen=True)
class AccessRules:
    """`[access]` and `[bot] admins`: chats as ChatKeys, people as `platform:id` keys."""

    groups: Literal["all", "allowlist"] = "all"
    allowed_groups: frozenset[ChatKey] = frozenset()
    blocked_users: frozenset[str] = frozenset()
    private: Literal["all", "allowlist", "off"] = "all"
    allowed_users: frozenset[str] = frozenset()
    admins: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Settings) -> AccessRules:
        access = settings.access
        return cls(
            groups=access.groups,
            allowed_groups=frozenset(_group_key(key) for key in access.allowed_groups),
            blocked_users=frozenset(access.blocked_users),
            private=access.private,
            allowed_users=frozenset(access.allowed_users),
            admins=frozenset(settings.bot.admins),
        )

    def is_admin(self, message: InboundMessage) -> bool:
        return message.sender_key in self.admins

    def group(self, here: ChatSettings) -> Decision:
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
        if self.is_admin(message):
            return Decision(True, "an admin")
        if self.private == "all":
            return Decision(True, '[access] private = "all"')
        if self.private == "allowlist" and message.sender_key in self.allowed_users:
            return Decision(True, "listed in [access] allowed_users")
        if self.private == "allowlist":
            return Decision(False, "not in [access] allowed_users")
        return Decision(False, '[access] private = "off"')

    def admit(self, message: InboundMessage, here: ChatSettings, *, command: bool) -> Decision:
        """Serve this message? `here` is its chat's settings (the defaults if none)."""
        if message.platform in EXEMPT_PLATFORMS:
            return Decision(True, "the console")
        admin = self.is_admin(message)
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


def _group_key(text: str) -> ChatKey:
    """A configured group as the daemon stores it: HTTP groups live under `group:<id>`
    (channels/http/chat_ids.py), so `http:team` and `http:group:team` are the same group."""
    key = ChatKey.parse(text)
    if key.platform == "http" and not key.chat_id.startswith(GROUP):
        return ChatKey("http", stored_group_id(key.chat_id))
    return key
