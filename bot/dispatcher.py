"""Every inbound message passes here: commands, trigger policy, processor."""

from __future__ import annotations

import logging

from bot.commands import Commands
from core.messages import ChatType, InboundMessage, Reply
from core.processor import GENERIC_APOLOGY, MessageProcessor, ShuttingDown
from core.triggers import TriggerPolicy, is_command

log = logging.getLogger(__name__)

RETRY_AFTER_S = 10.0  # what a caller is told to wait during a restart


class Dispatcher:
    """The MessageHandler every channel calls. Never raises: a failure is an apology."""

    def __init__(
        self,
        *,
        processor: MessageProcessor,
        commands: Commands,
        policy: TriggerPolicy,
        store_untriggered: bool,
    ) -> None:
        self._processor = processor
        self._commands = commands
        self._policy = policy
        self._store_untriggered = store_untriggered

    async def __call__(self, message: InboundMessage) -> Reply | None:
        try:
            return await self._dispatch(message)
        except Exception:
            log.exception("turn failed in %s", message.chat_key)
            return Reply(GENERIC_APOLOGY)

    async def _dispatch(self, message: InboundMessage) -> Reply | None:
        if not message.text.strip() and not message.images:
            return None
        if is_command(message.text):
            return await self._commands.handle(message)
        if not self._policy.triggers(message):
            if self._store_untriggered and message.chat_type is ChatType.GROUP:
                await self._processor.remember_context(message)
            return None
        try:
            text = await self._processor.handle(message)
        except ShuttingDown:
            return Reply("", retry_after_s=RETRY_AFTER_S)
        return Reply(text) if text else None
