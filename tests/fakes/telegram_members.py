"""The fake Bot API's group members: who is an admin (getChatMember), and the moderation
methods (restrictChatMember, banChatMember, deleteMessage of a member's message), each
recorded; `no_rights()` makes them answer 400 "not enough rights" as Telegram does for a
bot that is not an admin with those rights; `hold_moderation()` carries a call out and
holds its answer (the platform acted, the bot has not heard so: where a kill hurts most).
Inline buttons: `buttons()` reads a sent message's keyboard, `press()` pushes a
callback_query as Telegram does for a tap, answerCallbackQuery (once per query) and
editMessageReplyMarkup are recorded."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from aiohttp import web

from tests.fakes.telegram_chat import ChatModel, api_error, api_ok

NO_RIGHTS = "Bad Request: not enough rights to restrict/unrestrict chat member"


class MemberModel(ChatModel):
    """Mixed into FakeTelegram before ChatModel."""

    def _init_members(self) -> None:
        self.chat_admins: dict[int, dict[int, str]] = {}  # chat -> user -> creator|administrator
        self.member_messages: set[tuple[int, int]] = set()  # pushed by people, deletable
        self.restricted: list[dict[str, Any]] = []
        self.banned: list[dict[str, Any]] = []
        self.member_deletes: list[tuple[int, int]] = []
        self._no_rights = False
        self._moderation_open = asyncio.Event()
        self._moderation_open.set()
        self.toasts: dict[str, str] = {}  # callback query id -> the text it was answered with
        self.unbuttoned: set[tuple[int, int]] = set()  # keyboards taken off
        self._query_ids = itertools.count(9000)

    def buttons(self, chat_id: int, message_id: int) -> list[dict[str, Any]]:
        """The inline buttons message `message_id` shows now."""
        if (chat_id, message_id) in self.unbuttoned:
            return []
        sent: list[dict[str, Any]] = self.sent  # type: ignore[attr-defined]
        for params in sent:
            if params.get("chat_id") == chat_id and params.get("message_id") == message_id:
                markup = params.get("reply_markup") or {}
                return [b for row in markup.get("inline_keyboard", []) for b in row]
        return []

    def press(self, chat: dict[str, Any], who: dict[str, Any], message_id: int, data: str) -> str:
        """`who` taps the button carrying `data` under our message `message_id`."""
        query_id = str(next(self._query_ids))
        shown = self._stored_message(chat["id"], message_id) or {"text": ""}
        bot: dict[str, Any] = self.bot_user  # type: ignore[attr-defined]
        message = {"message_id": message_id, "date": int(time.time()), "chat": chat}
        message |= {"from": bot, "text": shown["text"]}
        query = {"id": query_id, "from": who, "chat_instance": "1", "message": message}
        self.push({"callback_query": query | {"data": data}})  # type: ignore[attr-defined]
        return query_id

    def make_admin(self, chat_id: int, user_id: int, status: str = "administrator") -> None:
        self.chat_admins.setdefault(chat_id, {})[user_id] = status

    def no_rights(self, on: bool = True) -> None:
        self._no_rights = on

    def hold_moderation(self) -> None:
        """Moderation calls are carried out and recorded; their answers wait until
        `release_moderation()`."""
        self._moderation_open.clear()

    def release_moderation(self) -> None:
        self._moderation_open.set()

    async def _answer_when_released(self) -> None:
        changed: asyncio.Condition = self._changed  # type: ignore[attr-defined]
        async with changed:  # what was done shows at once, before the answer
            changed.notify_all()
        await self._moderation_open.wait()

    async def _api_getChatMember(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        chat, who = int(params["chat_id"]), int(params["user_id"])
        status = self.chat_admins.get(chat, {}).get(who, "member")
        user = {"id": who, "is_bot": False, "first_name": f"user{who}"}
        member: dict[str, Any] = {"status": status, "user": user}
        if status == "administrator":
            member |= {"can_be_edited": False, "is_anonymous": False, "can_manage_chat": True}
            member |= {k: True for k in ADMIN_RIGHTS}
        elif status == "creator":
            member |= {"is_anonymous": False}
        return api_ok(member)

    async def _api_restrictChatMember(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        if self._no_rights:
            return api_error(400, NO_RIGHTS)
        self.restricted.append(params)
        await self._answer_when_released()
        return api_ok(True)

    async def _api_banChatMember(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        if self._no_rights:
            return api_error(400, "Bad Request: not enough rights to ban chat member")
        self.banned.append(params)
        await self._answer_when_released()
        return api_ok(True)

    async def _api_deleteMessage(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        key = (params.get("chat_id"), params.get("message_id"))
        if key in self.member_messages:
            if self._no_rights:
                return api_error(400, "Bad Request: message can't be deleted")
            self.member_messages.discard(key)  # type: ignore[arg-type]
            self.member_deletes.append(key)  # type: ignore[arg-type]
            await self._answer_when_released()
            return api_ok(True)
        return await super()._api_deleteMessage(params)

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        query_id = str(params.get("callback_query_id"))
        if query_id in self.toasts:
            return api_error(400, "Bad Request: query is too old and response timeout expired")
        self.toasts[query_id] = str(params.get("text") or "")
        return api_ok(True)

    async def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        chat, message_id = params.get("chat_id"), params.get("message_id")
        if not isinstance(chat, int) or self._stored_message(chat, message_id) is None:
            return api_error(400, "Bad Request: message to edit not found")
        key = (chat, int(message_id))  # type: ignore[arg-type]
        if params.get("reply_markup") or key in self.unbuttoned:
            return api_error(400, "Bad Request: message is not modified")
        self.unbuttoned.add(key)
        bot: dict[str, Any] = self.bot_user  # type: ignore[attr-defined]
        shown = {"message_id": message_id, "date": int(time.time()), "from": bot}
        return api_ok(shown | {"chat": {"id": chat, "type": "supergroup"}})


ADMIN_RIGHTS = (
    "can_delete_messages",
    "can_manage_video_chats",
    "can_restrict_members",
    "can_promote_members",
    "can_change_info",
    "can_invite_users",
    "can_post_stories",
    "can_edit_stories",
    "can_delete_stories",
)
