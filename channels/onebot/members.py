"""Group members through OneBot actions: a member's name and role (cached briefly), and the
moderation actions (set_group_ban, delete_msg, set_group_kick) with their refusals mapped
to core.moderation.platform's vocabulary."""

from __future__ import annotations

import logging
from typing import Any

from cachetools import TTLCache

from channels.onebot.actions import ActionFailed as OneBotActionFailed
from channels.onebot.actions import OneBotError
from channels.onebot.events import ROLES, id_param, parse_chat_id
from channels.onebot.transport import OneBotConnection
from core.inject import clean_name
from core.moderation.platform import ActionFailed, NoRights, PlatformAction

log = logging.getLogger(__name__)

ROLE_TTL_S = 60.0  # a role changed in QQ counts here within a minute


async def member_info(
    conn: OneBotConnection, group: str, user: str, timeout_s: float
) -> dict[str, Any] | None:
    try:
        data = await conn.actions.call(
            "get_group_member_info",
            {"group_id": id_param(group), "user_id": id_param(user), "no_cache": False},
            timeout_s=min(timeout_s, 3.0),
        )
    except OneBotError as exc:
        log.debug("onebot%s: get_group_member_info failed: %s", conn.label, exc)
        return None
    return data if isinstance(data, dict) else None


async def member_name(
    conn: OneBotConnection, group: str, user: str, timeout_s: float
) -> str | None:
    """Group card, else nickname (get_group_member_info), else get_stranger_info's."""
    info = await member_info(conn, group, user, timeout_s)
    for raw in (info or {}).get("card"), (info or {}).get("nickname"):
        if isinstance(raw, str) and clean_name(raw):
            return clean_name(raw)
    try:
        data = await conn.actions.call(
            "get_stranger_info", {"user_id": id_param(user)}, timeout_s=min(timeout_s, 3.0)
        )
    except OneBotError:
        return None
    nickname = data.get("nickname") if isinstance(data, dict) else None
    return clean_name(nickname) or None if isinstance(nickname, str) else None


class MemberRoles:
    """Members' roles as `get_group_member_info` says them, cached for ROLE_TTL_S."""

    def __init__(self) -> None:
        self._cache: TTLCache[tuple[str, str], str | None] = TTLCache(4096, ROLE_TTL_S)

    async def role(
        self, conn: OneBotConnection, chat_id: str, user: str, timeout_s: float
    ) -> str | None:
        kind, group = parse_chat_id(chat_id)
        if kind != "group":
            return None
        key = (chat_id, user)
        if key in self._cache:
            return self._cache[key]
        info = await member_info(conn, group, user, timeout_s)
        role = info.get("role") if info is not None else None
        found = role if role in ROLES else None
        if info is not None:
            self._cache[key] = found
        return found


async def moderate(conn: OneBotConnection, action: PlatformAction) -> None:
    """One OneBot action for `action`; a refusal (retcode ≠ 0) is NoRights, never retried."""
    _, group = parse_chat_id(action.chat_id)
    if action.kind == "mute":
        name, params = (
            "set_group_ban",
            {
                "group_id": id_param(group),
                "user_id": id_param(action.user_id),
                "duration": action.seconds,
            },
        )
    elif action.kind == "kick":
        name, params = (
            "set_group_kick",
            {
                "group_id": id_param(group),
                "user_id": id_param(action.user_id),
                "reject_add_request": False,
            },
        )
    elif action.kind == "delete" and action.message_id is not None:
        name, params = "delete_msg", {"message_id": id_param(action.message_id)}
    else:
        raise ActionFailed(f"nothing to do for {action.kind}")
    try:
        await conn.actions.call(name, params)
    except OneBotActionFailed as exc:
        raise NoRights(str(exc)) from None
    except OneBotError as exc:
        raise ActionFailed(str(exc)) from None
