"""The fake Bot API's group members: who is an admin (getChatMember), and the moderation
methods (restrictChatMember, banChatMember, deleteMessage of a member's message), each
recorded; `no_rights()` makes them answer 400 "not enough rights" as Telegram does for a
bot that is not an admin with those rights."""

from __future__ import annotations

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

    def make_admin(self, chat_id: int, user_id: int, status: str = "administrator") -> None:
        self.chat_admins.setdefault(chat_id, {})[user_id] = status

    def no_rights(self, on: bool = True) -> None:
        self._no_rights = on

    async def _api_getChatMember(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        chat, who = int(params["chat_id"]), int(params["user_id"])
        status = self.chat_admins.get(chat, {}).get(who, "member")
        user = {"id": who, "is_bot": False, "first_name": f"user{who}"}
        member: dict[str, Any] = {"status": status, "user": user}
        if status == "administrator":
            member |= {"can_be_edited": False, "is_anonymous": False, "can_manage_chat": True}
            member |= {k: True for k in _ADMIN_RIGHTS}
        elif status == "creator":
            member |= {"is_anonymous": False}
        return api_ok(member)

    async def _api_restrictChatMember(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        if self._no_rights:
            return api_error(400, NO_RIGHTS)
        self.restricted.append(params)
        return api_ok(True)

    async def _api_banChatMember(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        if self._no_rights:
            return api_error(400, "Bad Request: not enough rights to ban chat member")
        self.banned.append(params)
        return api_ok(True)

    async def _api_deleteMessage(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        key = (params.get("chat_id"), params.get("message_id"))
        if key in self.member_messages:
            if self._no_rights:
                return api_error(400, "Bad Request: message can't be deleted")
            self.member_messages.discard(key)  # type: ignore[arg-type]
            self.member_deletes.append(key)  # type: ignore[arg-type]
            return api_ok(True)
        return await super()._api_deleteMessage(params)


_ADMIN_RIGHTS = (
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
