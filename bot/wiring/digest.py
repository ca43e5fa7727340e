"""The digest's and the feeds' wiring: `/digest` with its daily post on the reminders'
scheduler, and `/sub` with its poller, built from `[digest]`, `[subscriptions]` and the
App's own pieces.

Why a module of its own: bot/wiring/app.py stays a table of parts; which of them the
digest and the feeds use (the chat model, the one door out, the `[links]` fetch rules,
the scheduler's exactly-once claim) is decided here.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import tzinfo
from zoneinfo import ZoneInfo

from aiohttp.abc import AbstractResolver

from bot.commands.digest import DIGEST_KIND, DigestCommand
from bot.commands.sub import SubCommand
from bot.commands.table import Commands
from bot.config import Settings
from bot.wiring.limits import limits_from
from bot.wiring.shared_media import link_policy
from core.admins import Admins
from core.clock import WallClock
from core.digest.recap import Digester, DigestOptions
from core.feeds.service import FeedLimits, Feeds
from core.llm import LLMProvider
from core.media.fetch import SafeDownloader
from core.reminders.scheduler import Composed, Scheduler
from core.reminders.service import Reminders
from core.text.tokens import TokenCounter
from core.turn.delivery import Outbox
from core.usage.meter import UsageMeter, UsageSubject
from memory.chats.settings_cache import CachedChatSettings
from memory.chats.types import ChatKey
from memory.digest.store import DigestStore
from memory.reminders.types import Reminder
from memory.turns.store import SqlStorage


@dataclass(frozen=True)
class DigestSeams:
    """What the digest and the feeds share with the turn path (the App's own pieces)."""

    storage: SqlStorage
    llm: LLMProvider
    counter: TokenCounter
    meter: UsageMeter
    outbox: Outbox
    chat_settings: CachedChatSettings
    admins: Admins


class DaemonDigest:
    """The built parts: `attach` adds the commands and the daily kind; `watch` polls."""

    def __init__(
        self,
        settings: Settings,
        seams: DigestSeams,
        clock: WallClock,
        resolver: AbstractResolver | None = None,  # DNS for feed fetches (tests map names)
    ) -> None:
        self._settings = settings
        self._seams = seams
        store = DigestStore(seams.storage.database)
        llm = settings.llm
        self.digester = Digester(
            seams.storage,
            store,
            seams.llm,
            seams.counter,
            options=DigestOptions(
                window=llm.context_window,
                reply_tokens=llm.reply_tokens,
                lookback_h=settings.digest.lookback_h,
                max_messages=settings.digest.max_messages,
            ),
            meter=seams.meter,
            clock=clock,
        )
        self.feeds: Feeds | None = None
        config = settings.subscriptions
        if config.enabled:
            fetcher = SafeDownloader(link_policy(settings), resolver=resolver)
            self.feeds = Feeds(
                store,
                fetcher,
                seams.outbox.send_proactive,  # the one door out
                limits=limits_from(config, FeedLimits),
                clock=clock,
            )

    async def zone_for(self, platform: str, chat_id: str) -> tzinfo:
        named = (await self._seams.chat_settings.get(ChatKey(platform, chat_id))).timezone
        return ZoneInfo(named or self._settings.bot.timezone)

    def attach(
        self, commands: Commands, reminders: Reminders | None, scheduler: Scheduler | None
    ) -> None:
        admins = self._seams.admins
        if self._settings.digest.enabled:
            commands.add("digest", DigestCommand(self.digester, admins, self.zone_for, reminders))
            if scheduler is not None:
                scheduler.compose_with(DIGEST_KIND, self._daily)
        if self.feeds is not None:
            commands.add("sub", SubCommand(self.feeds, admins))

    async def _daily(self, reminder: Reminder) -> Composed | None:
        """A daily digest's text when due; None (nothing sent) when nobody spoke."""
        digester = self.digester
        zone = await self.zone_for(reminder.platform, reminder.chat_id)
        who = UsageSubject(reminder.platform, reminder.chat_id, reminder.owner_id)
        recap = await digester.recap(reminder.platform, reminder.chat_id, zone, who)
        if not recap.posted:
            return None

        async def sent() -> None:
            await digester.posted(reminder.platform, reminder.chat_id, recap)

        return Composed(recap.text, sent)

    def watch(self, stop: asyncio.Event, stack: AsyncExitStack) -> None:
        """Poll the feeds until `stop` (the App's recovery stop) is set."""
        if self.feeds is None:
            return
        task = asyncio.create_task(self.feeds.run(stop), name="feeds")

        async def stopped() -> None:
            stop.set()
            await task

        stack.push_async_callback(stopped)
