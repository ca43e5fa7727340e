"""`/draw <prompt>`: a picture, drawn as a job and sent when ready.

The rules (who may draw, daily limits, pending jobs) are core/images/desk.py's, shared
with the model's `draw` tool; this module only reads the command.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.commands.table import text_after
from core.images.desk import DrawDesk, DrawRequest
from core.messages import InboundMessage, Reply


@dataclass(frozen=True)
class DrawCommand:
    """`/draw` for bot/commands/table.py: (message, args) -> Reply."""

    desk: DrawDesk

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        asked = await self.desk.ask(
            DrawRequest(
                platform=message.platform,
                chat_id=message.chat_id,
                chat_type=str(message.chat_type),
                user_id=message.sender_id,
                name=message.sender_name,
                prompt=text_after(message.text),
                thread_id=message.thread_id,
                message_id=message.message_id,
            )
        )
        return Reply(asked.line)
