"""A report's proposal on Telegram carries Approve and Decline buttons (issue 46); a press is
exactly the command its button names, sent by the person who pressed it.

What must hold: the proposal shows two buttons whose callback_data names the proposal
within Telegram's 64 bytes; a member's press is refused in the button's toast, nothing is
done and nothing is said in the group; an admin's press acts exactly once (one
restrictChatMember), the buttons come off and the outcome is said in the group; a second
press, or the typed `/mod approve` after it, says it was decided already and acts no more.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

# FAKE_CHAT: the report's verdict ("mute 10m"), read by conftest.py's `chat` fixture.
from tests.moderation.test_moderation_telegram import (  # noqa: F401 (FAKE_CHAT)
    FAKE_CHAT,
    GROUP,
    MEMBER,
    MEMBER_REFUSED,
    NEWBIE,
    OWNER,
    Group,
)


async def _proposal(room: Group, tg: FakeTelegram) -> tuple[int, list[dict[str, Any]]]:
    rude = room.say(NEWBIE, "you are all idiots")
    room.say(MEMBER, "/mod report", reply_to_message=rude)
    sent = await room.next_sent()
    assert str(sent.params["text"]).startswith("Proposal #1: mute 10m"), sent.params
    assert "/mod approve 1" in str(sent.params["text"])  # typed commands still named
    message_id = tg.sent[-1]["message_id"]
    return message_id, tg.buttons(GROUP["id"], message_id)


async def test_a_members_press_is_refused_and_an_admins_acts_once(
    room: Group, tg: FakeTelegram, chat: FakeOpenAI
) -> None:
    proposal, buttons = await _proposal(room, tg)
    assert [(b["text"], b["callback_data"]) for b in buttons] == [
        ("Approve", "mod:approve:1"),
        ("Decline", "mod:decline:1"),
    ]
    assert all(len(b["callback_data"].encode()) <= 64 for b in buttons)

    refused = tg.press(GROUP, MEMBER, proposal, "mod:approve:1")
    await tg.wait_until(lambda: refused in tg.toasts)
    assert tg.toasts[refused] == MEMBER_REFUSED
    assert tg.restricted == [] and tg.calls_of("restrictChatMember") == []
    assert tg.buttons(GROUP["id"], proposal)  # still there for an admin

    approved = tg.press(GROUP, OWNER, proposal, "mod:approve:1")
    said = await room.next_sent()  # the outcome, in the group, quoting the proposal
    assert "approved" in str(said.params["text"]), said.params
    assert said.params["reply_parameters"]["message_id"] == proposal
    assert "approved" in tg.toasts[approved]
    (restrict,) = tg.restricted
    assert (restrict["chat_id"], restrict["user_id"]) == (GROUP["id"], NEWBIE["id"])
    assert tg.buttons(GROUP["id"], proposal) == []  # decided: the buttons are off

    again = tg.press(GROUP, OWNER, proposal, "mod:approve:1")
    assert "already" in str((await room.next_sent()).params["text"])
    assert "already" in tg.toasts[again]
    assert "already" in await room.ask(OWNER, "/mod approve 1")
    assert len(tg.calls_of("restrictChatMember")) == 1
    sent = [str(c.params["text"]) for c in tg.calls_of("sendMessage")]
    assert MEMBER_REFUSED not in sent  # the member's press was answered in its toast only
    assert "approved by Olga" in await room.ask(OWNER, "/mod log")


async def test_an_admins_decline_press_does_nothing_and_a_stale_button_is_refused(
    room: Group, tg: FakeTelegram
) -> None:
    proposal, _ = await _proposal(room, tg)
    declined = tg.press(GROUP, OWNER, proposal, "mod:decline:1")
    said = await room.next_sent()
    assert "declined" in str(said.params["text"]) and "declined" in tg.toasts[declined]
    assert tg.buttons(GROUP["id"], proposal) == []
    forged = tg.press(GROUP, OWNER, proposal, "mod approve; rm -rf")
    await tg.wait_until(lambda: forged in tg.toasts)
    assert tg.toasts[forged] == "That button does nothing now."
    assert tg.calls_of("restrictChatMember") == [] and tg.calls_of("banChatMember") == []
    assert "already" in await room.ask(OWNER, "/mod approve 1")
    assert tg.calls_of("restrictChatMember") == []


async def test_polling_asks_for_button_presses(room: Group, tg: FakeTelegram) -> None:
    await tg.wait_for("getUpdates", 1)
    allowed = tg.calls_of("getUpdates")[0].params["allowed_updates"]
    assert "callback_query" in allowed and "message" in allowed
