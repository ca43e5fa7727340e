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


class Someone(Protocol):
    """A person in a chat, as an inbound message, a tool context or a job's asker names them."""

    @property
    def platform(self) -> str: ...

    @property
    def chat_id(self) -> str: ...

    @property
    def sender_key(self) -> str: ...  # "platform:id", as in [bot] admins


@dataclass(frozen=True)
class Admins:
    """`[bot] admins` (people as "platform:id" keys), asked one person in one chat at a time."""

    configured: frozenset[str] = frozenset()

    def here(self, who: Someone) -> bool:
        """Is `who` an admin in their chat?"""
        return who.sender_key in self.configured

    def operator(self, who: Someone) -> bool:
        """The operator at their own terminal: exempt from limits, refused nothing."""
        return who.platform in OPERATOR_PLATFORMS
