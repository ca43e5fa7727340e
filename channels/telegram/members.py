"""Group members on Telegram: who joined (`message.new_chat_members`), a member's status
(getChatMember, cached briefly), and the moderation methods (restrictChatMember,
deleteMessage, banChatMember), their refusals mapped to core.moderation.platform's words."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from cachetools import TTLCache
from telegram import Bot, ChatPermissions, Update
from telegram.error import BadRequest, Forbidden, TelegramError

from channels.telegram.inbound import PLATFORM, BotIdentity, telegram_message_id
from core.inject import clean_name
from core.messages import ChatType, InboundMessage
from core.moderation.platform import ActionFailed, NoRights, PlatformAction

ROLE_TTL_S = 60.0  # a promotion in Telegram counts here within a minute
_ROLES = {"creator": "owner", "administrator": "admin"}


def joined_members(update: Update, me: BotIdentity) -> list[InboundMessage]:
    """One "joined" message per new member of a group (the bot itself left out)."""
    msg = update.message
    if msg is None or not msg.new_chat_members or msg.chat.type not in ("group", "supergroup"):
        return []
    joined = []
    for member in msg.new_chat_members:
        if member.id == me.id:
            continue
        name = clean_name(member.full_name) or clean_name(member.username or "")
        joined.append(
            InboundMessage(
                platform=PLATFORM,
                chat_id=str(msg.chat.id),
                chat_type=ChatType.GROUP,
                sender_id=str(member.id),
                sender_name=name or str(member.id),
                text="",
                message_id=f"{msg.message_id}:join:{member.id}",
                timestamp=msg.date,
                joined=True,
            )
        )
    return joined


class Members:
    """getChatMember through a short cache, and the moderation calls, on one Bot."""

    def __init__(self, bot: Bot) -> None:
        self._bot = bot
        self._roles: TTLCache[tuple[str, str], str | None] = TTLCache(4096, ROLE_TTL_S)

    async def role(self, chat_id: str, user_id: str) -> str | None:
        if not chat_id.startswith("-") or not user_id.isdigit():
            return None  # a private chat has no admins
        key = (chat_id, user_id)
        if key in self._roles:
            return self._roles[key]
        try:
            member = await self._bot.get_chat_member(int(chat_id), int(user_id))
        except TelegramError:
            return None
        found = self._roles[key] = _ROLES.get(member.status, "member")
        return found

    async def moderate(self, action: PlatformAction) -> None:
        chat, user = int(action.chat_id), int(action.user_id)
        try:
            if action.kind == "mute":
                until = datetime.fromtimestamp(int(time.time()) + action.seconds, UTC)
                await self._bot.restrict_chat_member(
                    chat, user, ChatPermissions(can_send_messages=False), until_date=until
                )
            elif action.kind == "kick":
                await self._bot.ban_chat_member(chat, user)
            elif action.kind == "delete" and action.message_id is not None:
                await self._bot.delete_message(chat, telegram_message_id(action.message_id))
            else:
                raise ActionFailed(f"nothing to do for {action.kind}")
        except (BadRequest, Forbidden) as exc:
            raise NoRights(str(exc)) from None
        except TelegramError as exc:
            raise ActionFailed(str(exc)) from None
