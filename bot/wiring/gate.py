"""The gate (core/turn/gate.py) and the access rules, built from the config.

Only wiring: which settings feed which rule. The ladder itself, and what each rule
decides, live in core/turn/.
"""

from __future__ import annotations

from bot.config import Settings
from channels.http.chat_ids import GROUP, stored_group_id
from core.admins import Admins
from core.moderation.platform import Platforms
from core.turn.access import AccessRules
from core.turn.chiming import ChimeIn
from core.turn.delivery import ChannelRoutes, Outbox
from core.turn.gate import ChatSettingsSource, CommandTable, Gate, Hear, Moderator
from core.turn.processor import MessageProcessor
from core.turn.ratelimit import RateLimiter
from core.turn.triggers import TriggerPolicy
from core.usage.quota import QuotaGuard
from memory.chats.types import ChatKey


def admins_of(settings: Settings, routes: ChannelRoutes | None = None) -> Admins:
    """The one admin decision (core/admins.py) over `[bot] admins`, and with `[moderation]
    group_admins` a group's own owner and admins, as the message says or the started
    channels (`routes`) answer; built once per daemon."""
    mod = settings.moderation
    group_admins = mod.enabled and mod.group_admins
    roles = Platforms(routes) if routes is not None else None
    return Admins(frozenset(settings.bot.admins), group_admins=group_admins, roles=roles)


def access_rules(settings: Settings, admins: Admins) -> AccessRules:
    """`[access]`, with the one admin decision."""
    access = settings.access
    return AccessRules(
        groups=access.groups,
        allowed_groups=frozenset(_group_key(key) for key in access.allowed_groups),
        blocked_users=frozenset(access.blocked_users),
        private=access.private,
        allowed_users=frozenset(access.allowed_users),
        admins=admins,
    )


def build_gate(
    settings: Settings,
    *,
    processor: MessageProcessor,
    commands: CommandTable,
    outbox: Outbox,
    access: AccessRules,
    chat_settings: ChatSettingsSource | None = None,
    quota: QuotaGuard | None = None,
    hear: Hear | None = None,
    chime: ChimeIn | None = None,
    moderation: Moderator | None = None,
) -> Gate:
    """The daemon's gate: `[groups]` triggers, `[bot] rate_limit_per_min`, `access` with
    the chats' stored settings, and the `[limits]` quota guard the App built over the
    usage counters."""
    return Gate(
        processor=processor,
        commands=commands,
        outbox=outbox,
        policy=TriggerPolicy.create(settings.bot.name, settings.groups.wake_words),
        store_untriggered=settings.groups.store_untriggered,
        admins=access.admins,
        limiter=RateLimiter(settings.bot.rate_limit_per_min, window_s=60.0),
        access=access,
        chat_settings=chat_settings,
        quota=quota,
        hear=hear,
        chime=chime,
        chime_in=settings.groups.chime_in,
        moderation=moderation,
    )


def _group_key(text: str) -> ChatKey:
    """A configured group as the daemon stores it: HTTP groups live under `group:<id>`
    (channels/http/chat_ids.py), so `http:team` and `http:group:team` are the same group."""
    key = ChatKey.parse(text)
    if key.platform == "http" and not key.chat_id.startswith(GROUP):
        return ChatKey("http", stored_group_id(key.chat_id))
    return key
