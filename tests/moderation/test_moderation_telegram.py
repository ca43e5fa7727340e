"""Moderation in a Telegram group through the fake Bot API, the daemon whole.

What must hold (issue 46), as on QQ (test_moderation_qq.py): a member's `/mod` is refused and
changes nothing; the group's creator (getChatMember) may moderate with no `[bot] admins`
entry; a new member (`message.new_chat_members`) is welcomed by name as plain text, markup
in the name staying text; a keyword gets its answer with no model request; flooding gets
exactly one `restrictChatMember` with `can_send_messages: false` and the mute's
`until_date`; a newcomer's link is deleted and an admin's kept; a report does nothing
before an admin's approve and exactly one action after it; without the rights (400 "not
enough rights") the group gets one plain line, the platform is asked once, and `/mod log`
records it; another refusal (a message already gone) is logged as failed and not told.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.channels.test_channel_e2e import command
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import ApiCall, FakeTelegram, group_chat, user
from tests.rig import daemon, settings_for, telegram_section

OWNER = user(2001, "Olga")  # the group's creator as Telegram reports it
MEMBER = user(2003, "Mark")
NEWBIE = user(2009, "<b>Eve</b>", "*all* @everyone")
GROUP = group_chat(-100700, "Moderated")
VERDICT = "ACTION: mute 10m\nREASON: insults another member"
MEMBER_REFUSED = "Only the group's admins can change its moderation."

FAKE_CHAT = {"reply": VERDICT}  # served by conftest.py's `chat` fixture


class Group:
    """One Telegram group on the fake Bot API: say things, read the bot's answers."""

    def __init__(self, tg: FakeTelegram) -> None:
        self.tg = tg

    def say(self, who: dict[str, Any], words: str, **fields: Any) -> dict[str, Any]:
        if words.startswith("/"):
            fields.setdefault("entities", command(words))
        return self.tg.push_message(GROUP, who, words, **fields)

    async def next_sent(self) -> ApiCall:
        """The bot's next sendMessage after those read so far."""
        before = self._read
        await self.tg.wait_for("sendMessage", before + 1)
        self._read = before + 1
        return self.tg.calls_of("sendMessage")[before]

    async def ask(self, who: dict[str, Any], words: str, **fields: Any) -> str:
        """Say `words` and return the bot's answer."""
        self.say(who, words, **fields)
        return str((await self.next_sent()).params["text"])

    def join(self, *people: dict[str, Any]) -> None:
        self.tg.push_message(GROUP, people[0], None, new_chat_members=list(people))

    _read = 0


@pytest.fixture
async def group(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, tg: FakeTelegram
) -> AsyncIterator[Group]:
    tg.make_admin(GROUP["id"], OWNER["id"], "creator")
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
    async with daemon(settings):
        yield Group(tg)


async def test_a_member_is_refused_and_the_creator_sets_rules(group: Group) -> None:
    assert await group.ask(MEMBER, "/mod flood 5/10s mute 10m") == MEMBER_REFUSED
    assert "No keyword answers" in await group.ask(OWNER, "/mod reply")  # unchanged
    assert (await group.ask(OWNER, "/mod flood abc")).startswith("Usage: /mod flood")
    assert "Unknown action 'ban'" in await group.ask(OWNER, "/mod flood 5/10s ban")


async def test_welcome_keyword_flood_and_log(
    group: Group, tg: FakeTelegram, chat: FakeOpenAI
) -> None:
    assert await group.ask(OWNER, "/mod welcome Welcome, {name}!") == "Welcome set."
    group.join(NEWBIE)
    welcome = await group.next_sent()
    assert welcome.params["text"] == "Welcome, <b>Eve</b> *all* @everyone!"
    assert welcome.params["chat_id"] == GROUP["id"]
    assert "entities" not in welcome.params and "parse_mode" not in welcome.params  # plain

    assert "set" in await group.ask(OWNER, "/mod reply wifi => The password is on the fridge.")
    assert await group.ask(MEMBER, "what is the wifi password?") == (
        "The password is on the fridge."
    )
    assert chat.requests == []  # no model call, for the answer or anything else

    assert "mute 10m" in await group.ask(OWNER, "/mod flood 5/10s mute 10m")
    for n in range(6):
        group.say(MEMBER, f"spam {n}")
    before = int(time.time())
    (restrict,) = await tg.wait_for("restrictChatMember", 1)
    after = int(time.time())
    assert restrict.params["chat_id"] == GROUP["id"]
    assert restrict.params["user_id"] == MEMBER["id"]
    assert _permissions(restrict.params)["can_send_messages"] is False
    until = int(restrict.params["until_date"])
    assert before - 5 + 600 <= until <= after + 600, (until, before, after)
    log = await group.ask(OWNER, "/mod log")
    assert "mute 10m Mark" in log and "(flood)" in log, log
    assert len(tg.restricted) == 1 and tg.member_deletes == []
    assert chat.requests == []


async def test_a_newcomers_link_is_deleted_and_an_admins_kept(
    group: Group, tg: FakeTelegram
) -> None:
    assert "delete" in await group.ask(OWNER, "/mod links delete")
    group.join(NEWBIE)
    group.join(OWNER)  # new here too, but the group's creator
    mine = group.say(OWNER, "see https://example.org/rules")
    spam = group.say(NEWBIE, "cheap coins at https://spam.example")
    (deleted,) = await tg.wait_for("deleteMessage", 1)
    assert deleted.params == {"chat_id": GROUP["id"], "message_id": spam["message_id"]}
    assert tg.member_deletes == [(GROUP["id"], spam["message_id"])]
    assert (GROUP["id"], mine["message_id"]) in tg.member_messages  # the admin's kept
    log = await group.ask(OWNER, "/mod log")
    assert "delete" in log and "(links)" in log, log


async def test_a_report_waits_for_an_admins_approve_and_acts_once(
    group: Group, tg: FakeTelegram, chat: FakeOpenAI
) -> None:
    rude = group.say(NEWBIE, "you are all idiots")
    proposal = await group.ask(MEMBER, "/mod report", reply_to_message=rude)
    assert proposal.startswith("Proposal #1: mute 10m"), proposal
    assert len(chat.requests) == 1
    assert "you are all idiots" in str(chat.requests[0]["messages"])
    assert tg.restricted == []
    assert await group.ask(MEMBER, "/mod approve 1") == MEMBER_REFUSED
    assert tg.restricted == []
    assert "approved" in await group.ask(OWNER, "/mod approve 1")
    (restrict,) = tg.restricted
    assert (restrict["chat_id"], restrict["user_id"]) == (GROUP["id"], NEWBIE["id"])
    assert _permissions(restrict)["can_send_messages"] is False
    assert "already" in await group.ask(OWNER, "/mod approve 1")
    assert len(tg.calls_of("restrictChatMember")) == 1
    log = await group.ask(OWNER, "/mod log")
    assert "approved by Olga" in log, log


async def test_without_the_rights_one_line_and_one_attempt(group: Group, tg: FakeTelegram) -> None:
    tg.no_rights()
    assert "mute 10m" in await group.ask(OWNER, "/mod flood 2/10s mute 10m")
    for n in range(3):
        group.say(MEMBER, f"spam {n}")
    line = await group.next_sent()
    assert str(line.params["text"]).startswith("I can't mute Mark"), line.params
    assert "entities" not in line.params
    assert len(tg.calls_of("restrictChatMember")) == 1 and tg.restricted == []
    log = await group.ask(OWNER, "/mod log")
    assert "[no rights]" in log, log
    assert len(tg.calls_of("restrictChatMember")) == 1  # never retried


def _permissions(params: dict[str, Any]) -> dict[str, Any]:
    found = params["permissions"]
    assert isinstance(found, dict), found
    return found


async def test_another_refusal_is_logged_and_not_told_as_no_rights(
    group: Group, tg: FakeTelegram
) -> None:
    assert "delete" in await group.ask(OWNER, "/mod flood 2/10s delete")
    tg.fail("deleteMessage", 400, "Bad Request: message to delete not found")
    for n in range(3):
        group.say(MEMBER, f"spam {n}")
    await tg.wait_for("deleteMessage", 1)
    for _ in range(20):  # the outcome is written just after the refusal arrives
        log = await group.ask(OWNER, "/mod log")
        if "[started]" not in log:
            break
    assert "[failed]" in log, log
    texts = [str(c.params["text"]) for c in tg.calls_of("sendMessage")]
    assert not [t for t in texts if t.startswith("I can't")], texts
    assert len(tg.calls_of("deleteMessage")) == 1
