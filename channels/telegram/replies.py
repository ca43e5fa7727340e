"""The daemon's own answers to a message (command output, notices), as plain text.

Why plain: these texts are ours, not the model's Markdown, and may quote what users
stored (a memory with `*` or `#` in it must read as written). Why logged, not raised:
the update that asked is long acknowledged; a lost notice is the operator's to see.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from telegram.error import BadRequest, Forbidden, TelegramError

from channels.telegram.outbound import TelegramSender
from core.messages import ChatType, InboundMessage, Reply

log = logging.getLogger(__name__)


async def deliver_reply(
    sender: TelegramSender,
    reply: Reply,
    message: InboundMessage,
    where: tuple[int, int | None, int | None],
    *,
    bot_username: str | None,
    redact: Callable[[str], str],
) -> None:
    """Send `reply` to the chat `where` = (chat id, message to quote, topic); a private
    reply asked for in a group goes to the sender's DM, or a notice says how to allow it."""
    chat_id, reply_to, thread = where
    if reply.private and message.chat_type is ChatType.GROUP:
        try:
            await sender.send_text(int(message.sender_id), reply.text)
            return
        except (Forbidden, BadRequest) as exc:
            log.info(
                "telegram: cannot DM user %s (%s); asking them to start a chat",
                message.sender_id,
                exc,
            )
        except TelegramError as exc:
            log.error("telegram: DM to user %s failed: %s", message.sender_id, redact(str(exc)))
            return
        notice = (
            f"{message.sender_name}, I can't message you privately yet: open a chat with "
            f"@{bot_username}, press Start, then ask again."
        )
        await send_logged(sender, chat_id, notice, reply_to, thread, redact)
        return
    await send_logged(sender, chat_id, reply.text, reply_to, thread, redact)


async def send_logged(
    sender: TelegramSender | None,
    chat_id: int,
    text: str,
    reply_to: int | None,
    thread: int | None,
    redact: Callable[[str], str],
) -> None:
    if sender is None:
        log.error("telegram: not started; message to chat %s dropped", chat_id)
        return
    try:
        await sender.send_text(chat_id, text, reply_to=reply_to, thread_id=thread)
    except TelegramError as exc:
        log.error("telegram: could not deliver to chat %s: %s", chat_id, redact(str(exc)))
