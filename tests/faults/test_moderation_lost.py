"""A moderation action across SIGKILL: the real `chatterd run` process, killed after the
platform carried the action out and before the daemon heard so; not taken again after
the restart.

Why the same update again: Telegram hands an update out until a later `getUpdates`
confirms it, so a daemon killed mid-way may be given the message it was acting on once
more. The newcomer's join is stored, so the restarted daemon finds the same link from the
same newcomer; only the action recorded before the platform call stops a second
deleteMessage. Counted on the wire (the fake Bot API's deleteMessage calls) and in the
stored log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.db.migrate import Database, parse_url
from memory.moderation.store import SqlModerationStore
from tests.fakes.telegram_server import entity, group_chat, user
from tests.faults.test_nothing_lost import Harness
from tests.faults.test_reminders_lost import until

pytestmark = pytest.mark.faults

OWNER = user(3001, "Olga")
NEWBIE = user(3009, "Eve")
GROUP = group_chat(-100900, "Kept in order")
REPEAT = "was recorded already"


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


async def ask(harness: Harness, text: str) -> str:
    before = len(harness.tg.calls_of("sendMessage"))
    entities = [entity("bot_command", text, text.split()[0])]
    harness.tg.push_message(GROUP, OWNER, text, entities=entities)
    sent = await harness.tg.wait_for("sendMessage", before + 1, within_s=15)
    return str(sent[before].params["text"])


async def test_sigkill_after_the_platform_deleted_a_link_does_not_delete_again(
    harness: Harness, database_url: str
) -> None:
    tg = harness.tg
    tg.make_admin(GROUP["id"], OWNER["id"], "creator")
    first = await harness.daemon()
    assert "delete" in await ask(harness, "/mod links delete")
    assert await ask(harness, "/mod welcome Hi {name}") == "Welcome set."
    before = len(tg.calls_of("sendMessage"))
    tg.push_message(GROUP, NEWBIE, None, new_chat_members=[NEWBIE])
    await tg.wait_for("sendMessage", before + 1, within_s=15)  # the join is stored

    tg.hold_moderation()
    spam = tg.message(GROUP, NEWBIE, "cheap coins at https://spam.example")
    update_id = tg.push({"message": spam})
    await tg.wait_until(lambda: bool(tg.member_deletes), within_s=15)
    first.kill()  # the message is gone; the daemon never heard the platform's answer
    await first.wait()
    tg.release_moderation()

    tg.push_raw({"update_id": update_id, "message": spam})  # handed out again
    second = await harness.daemon()
    deleted = lambda: len(tg.calls_of("deleteMessage"))  # noqa: E731
    await until(lambda: REPEAT in second.log() or deleted() > 1, [first, second])
    log = await ask(harness, "/mod log")
    await second.terminate()

    assert deleted() == 1
    assert tg.member_deletes == [(GROUP["id"], spam["message_id"])]
    database = Database(parse_url(database_url))
    try:
        actions = await SqlModerationStore(database).log("telegram", str(GROUP["id"]))
    finally:
        await database.close()
    assert [(a.kind, a.user_id, a.state) for a in actions] == [
        ("delete", str(NEWBIE["id"]), "started")  # taken; its end never heard
    ]
    assert "delete Eve" in log and "(links)" in log, log
