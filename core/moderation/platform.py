"""What the core asks a platform to do to a member, channel-neutral, and how it may refuse.

The channels implement `Moderates` (OneBot set_group_ban / delete_msg / set_group_kick,
Telegram restrictChatMember / deleteMessage / banChatMember); the core routes to them by
platform name and never imports a platform library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class PlatformAction:
    """`kind` is "delete" (the message), "mute" (for `seconds`) or "kick"."""

    kind: str
    chat_id: str
    user_id: str
    message_id: str | None = None
    seconds: int = 0


class NoRights(Exception):
    """The platform refused: the bot is not allowed to do this in this group."""


class ActionFailed(Exception):
    """The platform could not be asked or answered otherwise (str: for the log)."""


@runtime_checkable
class Moderates(Protocol):
    """A channel that can act in its groups and say who their admins are."""

    name: str

    async def moderate(self, action: PlatformAction) -> None:
        """Do it once; NoRights or ActionFailed when it was not done."""

    async def member_role(self, chat_id: str, user_id: str) -> str | None:
        """ "owner", "admin", "member", or None (unknown, or not a group)."""


class Outlets(Protocol):
    """The started channels by platform name (core.turn.delivery.ChannelRoutes)."""

    def outlet(self, platform: str) -> object | None: ...


@dataclass(frozen=True)
class Platforms:
    """The channels that moderate, found among the started ones by platform name; also
    the one admin decision's `GroupRoles` (core/admins.py)."""

    outlets: Outlets

    def of(self, platform: str) -> Moderates | None:
        found = self.outlets.outlet(platform)
        return found if isinstance(found, Moderates) else None

    async def role(self, platform: str, chat_id: str, user_id: str) -> str | None:
        channel = self.of(platform)
        return await channel.member_role(chat_id, user_id) if channel is not None else None
