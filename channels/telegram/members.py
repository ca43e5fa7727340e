"""Group members on Telegram: who joined (`message.new_chat_members`, and `chat_member`
updates where the bot is an admin and so receives them), a member's status
(getChatMember, cached briefly), and the moderation methods (restrictChatMember,
deleteMessage, banChatMember), their refusals mapped to core.moderation.platform's words."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from cachetools import TTLCache
from telegram import Bot, ChatMember, ChatMemberUpdated, ChatPermissions, Update
from telegram.error import BadRequest, Forbidden, TelegramError

from channels.telegram.inbound import PLATFORM, BotIdentity, telegram_message_id
from core.inject import clean_name
from core.messages import ChatType, InboundMessage
from core.moderation.platform import ActionFailed, NoRights, PlatformAction

ROLE_TTL_S = 60.0  # a promotion in Telegram counts here within a minute
# One join, two reports (the service message and the chat_member update): the second
# within this long is the same join and is not welcomed again.
JOIN_TTL_S = 600.0
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


def member_joined(update: Update, me: BotIdentity) -> InboundMessage | None:
    """A `chat_member` update that makes someone (not the bot) a member of a group."""
    change: ChatMemberUpdated | None = update.chat_member
    if change is None or change.chat.type not in ("group", "supergroup"):
        return None
    who = change.new_chat_member.user
    if who.id == me.id or _inside(change.old_chat_member) or not _inside(change.new_chat_member):
        return None
    name = clean_name(who.full_name) or clean_name(who.username or "")
    return InboundMessage(
        platform=PLATFORM,
        chat_id=str(change.chat.id),
        chat_type=ChatType.GROUP,
        sender_id=str(who.id),
        sender_name=name or str(who.id),
        text="",
        timestamp=change.date,
        joined=True,
    )


def _inside(member: ChatMember) -> bool:
    if member.status == ChatMember.RESTRICTED:
        return bool(getattr(member, "is_member", False))
    return member.status in (ChatMember.MEMBER, ChatMember.ADMINISTRATOR, ChatMember.OWNER)


class Members:
    """getChatMember through a short cache, and the moderation calls, on one Bot."""

    def __init__(self, bot: Bot) -> None:
        self._bot = bot
        self._roles: TTLCache[tuple[str, str], str | None] = TTLCache(4096, ROLE_TTL_S)
        self._joined: TTLCache[tuple[str, str], bool] = TTLCache(4096, JOIN_TTL_S)

    def joins(self, update: Update, me: BotIdentity) -> list[InboundMessage]:
        """Who joined, from either source, each join once."""
        found = joined_members(update, me)
        if (member := member_joined(update, me)) is not None:
            found.append(member)
        fresh = []
        for message in found:
            key = (message.chat_id, message.sender_id)
            if key not in self._joined:
                self._joined[key] = True
                fresh.append(message)
        return fresh

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
            raise (NoRights if _for_want_of_rights(exc) else ActionFailed)(str(exc)) from None
        except TelegramError as exc:
            raise ActionFailed(str(exc)) from None


def _for_want_of_rights(exc: TelegramError) -> bool:
    """Telegram's refusals for a bot that is no admin with the rights ("not enough rights
    to ...", "need administrator rights", "CHAT_ADMIN_REQUIRED", "message can't be
    deleted"); another 400 ("message to delete not found", "user is an administrator")
    is a failure the group is not told about."""
    text = exc.message.casefold()
    return any(part in text for part in ("rights", "admin_required", "can't be deleted"))
