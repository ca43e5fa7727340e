"""Moderation (`[moderation]`, core/moderation/) built from the config: the rules engine the
gate asks first, the `/mod` command, and the group roles the one admin decision asks."""

from __future__ import annotations

from bot.commands.moderation import ModCommand
from bot.commands.table import Commands
from bot.config import Settings
from core.admins import Admins
from core.llm import LLMProvider
from core.moderation.actor import Actor, Tell
from core.moderation.engine import Moderation, ModerationOptions
from core.moderation.platform import Platforms
from core.turn.delivery import ChannelRoutes
from memory.turns.store import SqlStorage


def build_moderation(
    settings: Settings,
    storage: SqlStorage,
    routes: ChannelRoutes,
    outbox: Tell,
    admins: Admins,
    model: LLMProvider,
    commands: Commands,
) -> Moderation | None:
    """The engine and `/mod` (None when `[moderation] enabled = false`)."""
    mod = settings.moderation
    if not mod.enabled:
        return None
    options = ModerationOptions(
        group_admins=mod.group_admins,
        new_member_hours=mod.new_member_hours,
        report_tokens=mod.report_tokens,
    )
    actor = Actor(storage.moderation, Platforms(routes), outbox)
    moderation = Moderation(storage.moderation, actor, admins, model=model, options=options)
    commands.add("mod", ModCommand(moderation))
    return moderation
