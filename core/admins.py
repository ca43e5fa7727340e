"""Is this person an admin here: the one decision, asked by everything with an admin part.

Why one place: the gate (access, the rate limit, the quotas), the command table and each
command with an admin-only part, the MCP tools and the job desks (`draw`, `spawn`) all
ask it, and two answers for one person would be a hole. The question names the chat
("here") and not only the person, so a rule that depends on the chat (a group's own owner
and admins, as the platform reports them) is added here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# The operator at their own terminal (`chatterd chat`): never restricted, never limited.
OPERATOR_PLATFORMS = frozenset({"console"})
# A group's own owner and admins, as the platforms name them (OneBot `sender.role`,
# Telegram `getChatMember` status).
GROUP_ADMIN_ROLES = frozenset({"owner", "admin", "creator", "administrator"})


class Someone(Protocol):
    """A person in a chat, as an inbound message, a tool context or a job's asker names them."""

    @property
    def platform(self) -> str: ...

    @property
    def chat_id(self) -> str: ...

    @property
    def sender_key(self) -> str: ...  # "platform:id", as in [bot] admins


class GroupRoles(Protocol):
    """Asks the platform for a member's standing in a group ("owner", "admin", "member";
    None: unknown): the channels answer it (OneBot `get_group_member_info`, Telegram
    `getChatMember`), each through a short cache of its own."""

    async def role(self, platform: str, chat_id: str, user_id: str) -> str | None: ...


@dataclass(frozen=True)
class Admins:
    """`[bot] admins` (people as "platform:id" keys), asked one person in one chat at a time;
    with `group_admins` also a group's own owner and admins as the platform reports them."""

    configured: frozenset[str] = frozenset()
    group_admins: bool = False  # `[moderation] group_admins`
    roles: GroupRoles | None = None  # the platform's answer when the message did not say

    def here(self, who: Someone) -> bool:
        """Is `who` an admin in their chat? Synchronous: a group role counts as the
        channel reported it on the message (`sender_role`), never a lookup."""
        if who.sender_key in self.configured:
            return True
        role = getattr(who, "sender_role", None)
        return self.group_admins and role is not None and role in GROUP_ADMIN_ROLES

    async def confirmed(self, who: Someone, user_id: str | None = None) -> bool:
        """The same decision, asking the platform when the message did not say: before
        anything is done to or on behalf of a person (a moderation action, an approve).
        `user_id` names another person in `who`'s chat (the one a rule would act on)."""
        if user_id is None:
            if self.here(who):
                return True
            if getattr(who, "sender_role", None) is not None:
                return False  # the platform said it on the message: no second question
            user_id = who.sender_key.partition(":")[2]
        elif f"{who.platform}:{user_id}" in self.configured:
            return True
        if not self.group_admins or self.roles is None:
            return False  # a private chat: the channel answers None
        role = await self.roles.role(who.platform, who.chat_id, user_id)
        return role is not None and role in GROUP_ADMIN_ROLES

    def operator(self, who: Someone) -> bool:
        """The operator at their own terminal: exempt from limits, refused nothing."""
        return who.platform in OPERATOR_PLATFORMS
