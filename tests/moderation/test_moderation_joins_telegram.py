"""`chat_member` updates as a second source of "member joined" on Telegram (issue 46).

What must hold: the bot asks for `chat_member` updates; a member who joins is welcomed once
though Telegram reports the join twice (the update and the `new_chat_members` service
message); a promotion or a member leaving is no join.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.telegram_members import ADMIN_RIGHTS
from tests.fakes.telegram_server import FakeTelegram
from tests.moderation.test_moderation_telegram import GROUP, NEWBIE, OWNER, Group


def _change(who: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {
        "chat": GROUP,
        "from": OWNER,
        "date": 1_800_000_000,
        "old_chat_member": {"status": old, "user": who},
        "new_chat_member": {"status": new, "user": who},
    }


async def test_a_join_reported_twice_is_welcomed_once(room: Group, tg: FakeTelegram) -> None:
    await tg.wait_for("getUpdates", 1)
    assert "chat_member" in tg.calls_of("getUpdates")[0].params["allowed_updates"]
    assert await room.ask(OWNER, "/mod welcome Hello {name}") == "Welcome set."
    tg.push({"chat_member": _change(NEWBIE, "left", "member")})
    welcome = await room.next_sent()
    assert welcome.params["text"] == "Hello <b>Eve</b> *all* @everyone"
    room.join(NEWBIE)  # the same join's service message
    carol = {"id": 2011, "is_bot": False, "first_name": "Carol"}
    tg.push({"chat_member": _change(carol, "member", "left")})  # leaving: no join
    promoted = _change(carol, "member", "administrator")  # a promotion: no join
    promoted["new_chat_member"] |= {"can_be_edited": False, "is_anonymous": False}
    promoted["new_chat_member"] |= {"can_manage_chat": True} | dict.fromkeys(ADMIN_RIGHTS, True)
    tg.push({"chat_member": promoted})
    dave = {"id": 2012, "is_bot": False, "first_name": "Dave"}
    room.join(dave)  # a join that comes after them all
    assert (await room.next_sent()).params["text"] == "Hello Dave"
    assert "Hello {name}" in await room.ask(OWNER, "/mod welcome")  # one more round trip
    texts = [str(c.params["text"]) for c in tg.calls_of("sendMessage")]
    assert [t for t in texts if t.startswith("Hello")] == [
        "Hello <b>Eve</b> *all* @everyone",
        "Hello Dave",
    ]
