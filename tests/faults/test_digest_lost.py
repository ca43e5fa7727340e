"""A daily digest across SIGKILL: the real `chatterd run` process, killed while the digest
is at the platform's door. The next process posts it once (the run claimed by the dead one
is recovered), and never again that day. The digest runs on the reminders' scheduler, so
this is its exactly-once claim seen from a daily digest's side.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memory.db.migrate import Database, parse_url
from memory.reminders.store import ReminderStore
from tests.fakes.telegram_server import entity, group_chat
from tests.faults.test_nothing_lost import PEOPLE, Harness
from tests.faults.test_reminders_lost import until

pytestmark = pytest.mark.faults

ADMIN = PEOPLE[0]
GROUP = group_chat(-100810, "Evening club")
EXTRA = {
    "CHATTERD_BOT__ADMINS": f'["telegram:{ADMIN["id"]}"]',
    "CHATTERD_BOT__TIMEZONE": "Europe/Berlin",
    "CHATTERD_REMINDERS__TICK_S": "0.2",
}


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


def digests(harness: Harness) -> list[str]:
    return [
        str(s["text"])
        for s in harness.tg.sent
        if int(s["chat_id"]) == GROUP["id"] and str(s["text"]).startswith("📋 Digest since")
    ]


def next_minute() -> datetime:
    """The next whole minute at least 15 s away (time to confirm the command first)."""
    soon = datetime.now(UTC) + timedelta(seconds=15)
    return soon.replace(second=0, microsecond=0) + timedelta(minutes=1)


async def test_a_daily_digest_killed_at_the_door_is_posted_once(
    harness: Harness, database_url: str
) -> None:
    first = await harness.daemon(EXTRA)
    for n, who in enumerate(PEOPLE):
        harness.tg.push_message(GROUP, who, f"plans for tonight, part {n}")
    due = next_minute()
    at = due.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M")
    text = f"/digest daily {at}"
    harness.tg.push_message(GROUP, ADMIN, text, entities=[entity("bot_command", text, "/digest")])
    (confirmed,) = await harness.tg.wait_for("sendMessage", 1, within_s=15)
    assert str(confirmed.params["text"]).startswith("📋 Daily digest #1 set for")
    harness.tg.hold_sends()
    wait_s = (due - datetime.now(UTC)).total_seconds() + 30
    await harness.tg.wait_for("sendMessage", 2, within_s=wait_s)  # the digest, held
    first.kill()
    await first.wait()
    harness.tg.release_sends()  # the platform never accepted it: its sender is gone
    assert digests(harness) == []
    second = await harness.daemon(EXTRA)
    await until(lambda: digests(harness), [first, second], 40)
    database = Database(parse_url(database_url))
    try:
        store = ReminderStore(database)
        for _ in range(400):  # until the run is settled: after that nothing may resend it
            (run,) = await store.runs_of(1)
            if run.state != "claimed":
                break
            await asyncio.sleep(0.05)
    finally:
        await database.close()
    await second.terminate()
    assert run.state == "delivered"
    (posted,) = digests(harness)
    for n in range(len(PEOPLE)):
        assert f"plans for tonight, part {n}" in str(harness.model.requests[-1].get("messages"))
    assert "answer to" in posted  # the fake model's recap
