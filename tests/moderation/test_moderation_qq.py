"""Moderation in a QQ group through the fake OneBot v11 (reverse WebSocket), the daemon whole.

What must hold (issue 46): a member's `/mod` is refused and changes nothing; the group's
owner (`sender.role`) may moderate with no `[bot] admins` entry; a joining member is
welcomed by name as plain text ("@全体成员" stays text); a keyword gets its answer with no
model request; flooding gets exactly one `set_group_ban` with the configured duration; a
newcomer's link is deleted and an admin's kept; a report does nothing before an admin's
approve and exactly one action after it; without the rights the group gets one line and
the platform is asked once; `/mod log` lists what was done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from channels.onebot.channel import OneBotChannel
from tests.fakes.onebot_impl import FakeLink, FakeOneBot, sent_text
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import daemon, settings_for

QQ_SELF, OWNER, MEMBER, NEWBIE = 10001, 20001, 20003, 20009
GROUP = 30003
VERDICT = "ACTION: mute 10m\nREASON: insults another member"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(reply=VERDICT, model="chat-model") as fake:
        yield fake


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "data": {"text": value}}]


class Group:
    """One QQ group on the fake implementation: say things, read the bot's answers."""

    def __init__(self, impl: FakeOneBot, link: FakeLink) -> None:
        self.impl, self.link = impl, link

    async def say(self, who: int, words: str, **extra: Any) -> dict[str, Any]:
        role = "owner" if who == OWNER else "member"
        event = self.impl.group_message(
            text(words), user_id=who, group_id=GROUP, role=role, **extra
        )
        await self.link.send_event(event)
        return event

    async def ask(self, who: int, words: str, **extra: Any) -> str:
        """Say `words` and return the bot's answer."""
        await self.say(who, words, **extra)
        return sent_text(await self.link.next_action("send_group_msg"))


@pytest.fixture
async def group(tmp_path: Path, database_url: str, model: FakeOpenAI) -> AsyncIterator[Group]:
    impl = FakeOneBot(self_id=QQ_SELF)
    settings = settings_for(
        tmp_path, database_url, model, onebot={"enabled": True, "host": "127.0.0.1", "port": 0}
    )
    try:
        async with daemon(settings) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
            await link.next_action("get_login_info")
            yield Group(impl, link)
    finally:
        await impl.close()


async def test_a_member_is_refused_and_the_owner_sets_rules(group: Group) -> None:
    refused = await group.ask(MEMBER, "/mod flood 5/10s mute 10m")
    assert refused == "Only the group's admins can change its moderation."
    assert "No keyword answers" in await group.ask(OWNER, "/mod reply")
    assert (await group.ask(OWNER, "/mod flood abc")).startswith("Usage: /mod flood")
    assert "Unknown action 'ban'" in await group.ask(OWNER, "/mod flood 5/10s ban")
    assert "1 to 43200 minutes" in await group.ask(OWNER, "/mod flood 5/10s mute 99999m")
    assert "at most 1000 characters" in await group.ask(OWNER, f"/mod reply hi => {'x' * 1001}")


async def test_welcome_keyword_flood_and_log(group: Group, model: FakeOpenAI) -> None:
    assert (
        await group.ask(OWNER, "/mod welcome Welcome, {name}! Read the pinned notes.")
        == "Welcome set."
    )
    group.impl.members[(GROUP, NEWBIE)] = {"card": "@全体成员", "nickname": "x"}
    await group.link.send_event(group.impl.group_increase(NEWBIE, GROUP))
    welcome = await group.link.next_action("send_group_msg")
    assert sent_text(welcome) == "Welcome, @全体成员! Read the pinned notes."
    assert all(seg["type"] == "text" for seg in welcome["params"]["message"])  # never an at-all

    assert "set" in await group.ask(OWNER, "/mod reply wifi => The password is on the fridge.")
    asked = len(model.requests)
    assert await group.ask(MEMBER, "what is the wifi password?") == "The password is on the fridge."
    assert len(model.requests) == asked  # no model call

    assert "mute 10m" in await group.ask(OWNER, "/mod flood 5/10s mute 10m")
    for n in range(6):
        await group.say(MEMBER, f"spam {n}")
    ban = await group.link.next_action("set_group_ban")
    assert ban["params"] == {"group_id": GROUP, "user_id": MEMBER, "duration": 600}
    log = await group.ask(OWNER, "/mod log")
    assert "mute 10m" in log and "(flood)" in log, log
    assert [m for m in group.impl.moderated if "duration" in m] == [ban["params"]]


async def test_a_newcomers_link_is_deleted_and_an_admins_kept(group: Group) -> None:
    assert "delete" in await group.ask(OWNER, "/mod links delete")
    assert await group.ask(OWNER, "/mod welcome Hi {name}") == "Welcome set."
    for joining in (NEWBIE, OWNER):  # both new here; the owner is an admin all the same
        await group.link.send_event(group.impl.group_increase(joining, GROUP))
        await group.link.next_action("send_group_msg")
    await group.say(OWNER, "see https://example.org/rules")
    spam = await group.say(NEWBIE, "cheap coins at https://spam.example")
    deleted = await group.link.next_action("delete_msg")
    assert deleted["params"] == {"message_id": spam["message_id"]}
    assert group.impl.moderated == [{"message_id": spam["message_id"]}]  # the admin's kept


async def test_a_report_waits_for_an_admins_approve_and_acts_once(group: Group) -> None:
    rude = await group.say(NEWBIE, "you are all idiots")
    quote = {"type": "reply", "data": {"id": str(rude["message_id"])}}
    event = group.impl.group_message([quote, *text("/mod report")], user_id=MEMBER, group_id=GROUP)
    await group.link.send_event(event)
    proposal = sent_text(await group.link.next_action("send_group_msg"))
    assert proposal.startswith("Proposal #1: mute 10m"), proposal
    assert group.impl.moderated == []
    assert (
        await group.ask(MEMBER, "/mod approve 1")
        == "Only the group's admins can change its moderation."
    )
    assert group.impl.moderated == []
    assert "approved" in await group.ask(OWNER, "/mod approve 1")
    assert group.impl.moderated == [{"group_id": GROUP, "user_id": NEWBIE, "duration": 600}]
    assert "already" in await group.ask(OWNER, "/mod approve 1")
    assert len(group.impl.moderated) == 1


async def test_without_the_rights_one_line_and_one_attempt(group: Group) -> None:
    group.impl.no_rights = True
    await group.ask(OWNER, "/mod flood 2/10s kick")
    for n in range(3):
        await group.say(MEMBER, f"spam {n}")
    line = sent_text(await group.link.next_action("send_group_msg"))
    assert line.startswith("I can't remove"), line
    assert [r["action"] for r in group.impl.refused] == ["set_group_kick"]
    assert "[no rights]" in await group.ask(OWNER, "/mod log")
