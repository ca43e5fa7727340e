"""The daemon's own texts (command output, notices), sent plain; a DM asked for in a group.

Why plain: these texts are ours, not the model's Markdown, and may quote what users
stored (a memory with `*` or `#` in it must read as written). Why logged, not raised:
the update that asked is long acknowledged; a lost notice is the operator's to see.
"""

from __future__ import annotations

import logging

from telegram.error import BadRequest, Forbidden

from channels.telegram.completion import Target
from channels.telegram.outbound import TelegramSender
from core.messages import OutboundMessage

log = logging.getLogger(__name__)


async def send_private(
    sender: TelegramSender,
    message: OutboundMessage,
    target: Target,
    *,
    bot_username: str | None,
) -> list[int]:
    """Send `message` to its `private_to` person's DM; when they never opened one (403,
    400), a notice in the chat `target` says how to allow it. The sent ids; raises
    TelegramError when neither went out."""
    person = message.private_to
    assert person is not None
    try:
        return await sender.send_text(int(person.user_id), message.text)
    except (Forbidden, BadRequest) as exc:
        log.info(
            "telegram: cannot DM user %s (%s); asking them to start a chat", person.user_id, exc
        )
    notice = (
        f"{person.name}, I can't message you privately yet: open a chat with "
        f"@{bot_username}, press Start, then ask again."
    )
    return await sender.send_text(
        target.chat_id, notice, reply_to=target.reply_to, thread_id=target.thread_id
    )
