"""The chime-in's parts, from `[groups]` and the App's own pieces.

The App hands over what it already built; this decides which of them the chime-in uses
and how the quota reads for a message nobody addressed.
"""

from __future__ import annotations

from bot.config import Settings
from core.clock import WallClock
from core.messages import InboundMessage
from core.turn.chime import ChimeWindows
from core.turn.chiming import ChimeIn, ChimeOptions, ChimeSeams
from core.usage.quota import QuotaGuard
from memory.chats.settings_cache import CachedChatSettings


class GroupSettingsRules:
    """A group's allowance from the quota guard and its persona from the per-chat settings."""

    def __init__(self, quota: QuotaGuard, chat_settings: CachedChatSettings) -> None:
        self._quota = quota
        self._chat_settings = chat_settings

    async def over_quota(self, message: InboundMessage) -> bool:
        # The chat pays for a chime-in, not the last speaker: the group's and the
        # global allowance count; one person's used-up allowance does not.
        return await self._quota.over(message) in ("group", "global")

    async def persona(self, message: InboundMessage) -> str:
        return (await self._chat_settings.get(message.chat_key)).persona


def build_chime(
    settings: Settings,
    seams: ChimeSeams,
    *,
    quota: QuotaGuard,
    chat_settings: CachedChatSettings,
    clock: WallClock,
) -> ChimeIn:
    """Always built: a group may turn it on with `/bot chime` while `[groups]` says off."""

    return ChimeIn(
        windows=ChimeWindows(lambda: clock().timestamp(), gap_s=settings.groups.chime_min_gap_s),
        seams=seams,
        rules=GroupSettingsRules(quota, chat_settings),
        options=ChimeOptions(bot_name=settings.bot.name),
    )
