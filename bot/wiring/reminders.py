"""The reminders' wiring: the service, the scheduler and its gate, built from Settings,
and the commands and the model's tool that use them.

The rules that need the daemon's policy (core/turn/access.py: a blocked owner, a group
switched off or denied gets nothing) are decided here, once, for the scheduler.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime

from bot.commands.remind import RemindCommand
from bot.commands.table import Commands
from bot.config import Settings
from bot.wiring.limits import limits_from
from core.admins import Admins
from core.messages import ChatType, InboundMessage
from core.reminders.scheduler import Gate, Lock, Scheduler, SchedulerOptions, owner_message
from core.reminders.service import ReminderLimits, Reminders
from core.reminders.tool import remind_tool
from core.tools.registry import ToolRegistry
from core.turn.access import AccessRules
from core.turn.delivery import Outbox
from core.turn.outcomes import ShuttingDown
from core.turn.processor import MessageProcessor
from memory.chats.settings_cache import CachedChatSettings
from memory.chats.types import ChatKey
from memory.reminders.types import Reminder
from memory.turns.store import SqlStorage

Clock = Callable[[], datetime]


def build_reminders(
    settings: Settings, storage: SqlStorage, chat_settings: CachedChatSettings, clock: Clock
) -> Reminders | None:
    config = settings.reminders
    if not config.enabled:
        return None

    async def zone_of(platform: str, chat_id: str) -> str | None:
        return (await chat_settings.get(ChatKey(platform, chat_id))).timezone

    push_url = settings.http.push_url
    return Reminders(
        storage.reminders,
        default_zone=settings.bot.timezone,
        limits=limits_from(config, ReminderLimits),
        zone_of=zone_of,
        can_reach=lambda platform: platform != "http" or push_url is not None,
        clock=clock,
    )


def add_commands(commands: Commands, reminders: Reminders, admins: Admins) -> None:
    command = RemindCommand(reminders, admins)
    commands.add("remind", command.remind)
    commands.add("schedule", command.schedule)


def add_remind_tool(registry: ToolRegistry, reminders: Reminders | None) -> None:
    """The model's `remind` tool, when the daemon keeps reminders."""
    if reminders is not None:
        registry.register(remind_tool(reminders))


def delivery_gate(access: AccessRules, chat_settings: CachedChatSettings) -> Gate:
    """Why a reminder is not delivered now (None: deliver): the owner blocked, the group
    switched off (/bot off) or not served, a private chat the config closed."""

    async def gate(reminder: Reminder) -> str | None:
        here = await chat_settings.get(reminder.chat_key)
        if reminder.chat_type == ChatType.GROUP.value and not here.enabled:
            return "the group is switched off (/bot off)"
        admission = access.admit(owner_message(reminder), here, command=False)
        return None if admission.allowed else admission.why

    return gate


def build_scheduler(
    settings: Settings,
    storage: SqlStorage,
    processor: MessageProcessor,
    chat_settings: CachedChatSettings,
    clock: Clock,
    outbox: Outbox,
    access: AccessRules,
) -> Scheduler:

    async def run_task(message: InboundMessage) -> str | None:
        """Run the task's turn; the processor delivers its answer. Where the channel
        only answers waiting requests (HTTP), the stored answer is returned for the
        scheduler to send to the push target."""
        try:
            await processor.handle(message)
        except ShuttingDown:
            return None  # accepted: the intake's recovery answers it after the restart
        if outbox.pushes(message.platform) or message.message_id is None:
            return None
        entry = await storage.intake.by_message(
            message.platform, message.chat_id, message.message_id
        )
        if entry is None or entry.state != "answered" or entry.reply_turn_id is None:
            return None
        reply = await storage.turn_content(entry.reply_turn_id)
        return reply.content if reply is not None else None

    async def task_outcome(message: InboundMessage) -> str | None:
        assert message.message_id is not None
        entry = await storage.intake.by_message(
            message.platform, message.chat_id, message.message_id
        )
        return entry.state if entry is not None else None

    lock: Lock | None = None
    if storage.dialect == "postgresql":  # the sender holds it while it sends (see scheduler)
        leases = storage.leases

        def lock(key: int) -> AbstractAsyncContextManager[bool]:
            return leases.hold(f"reminder:{key}", wait=False)

    config = settings.reminders
    return Scheduler(
        storage.reminders,
        send=outbox.send_proactive,
        run_task=run_task,
        task_outcome=task_outcome,
        gate=delivery_gate(access, chat_settings),
        options=SchedulerOptions(catch_up_s=config.catch_up_s, tick_s=config.tick_s),
        clock=clock,
        lock=lock,
        worker_id=f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
    )
