"""The intake table: accepted once, conditional state changes, expiry, stats."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from memory.db.migrate import Database, parse_url
from memory.turns.intake import IntakeConflict, IntakeDraft, IntakeStore, claim_in, settle_in
from memory.turns.store import open_storage


@pytest.fixture
async def intake(database_url: str) -> AsyncIterator[tuple[IntakeStore, Database]]:
    store = await open_storage(database_url)  # migrates
    await store.close()
    database = Database(parse_url(database_url))
    try:
        yield IntakeStore(database), database
    finally:
        await database.close()


def draft(message_id: str | None = "m1", **changes: object) -> IntakeDraft:
    values: dict[str, object] = dict(
        platform="telegram",
        chat_id="-100",
        chat_type="group",
        sender_id="7",
        sender_name="Ann",
        text="hello",
        platform_message_id=message_id,
        thread_id="5",
        payload={"images": [{"ref": "file-1"}], "mentions_bot": True},
    )
    values.update(changes)
    return IntakeDraft(**values)  # type: ignore[arg-type]


async def test_accepted_once_per_platform_message(intake: tuple[IntakeStore, Database]) -> None:
    store, _ = intake
    first = await store.accept(draft())
    assert first is not None and first.state == "pending" and first.attempts == 0
    assert first.payload["images"] == [{"ref": "file-1"}] and first.thread_id == "5"
    assert await store.accept(draft()) is None  # a re-delivered update
    other_chat = await store.accept(draft(chat_id="-200"))
    assert other_chat is not None and other_chat.id != first.id
    no_id_1 = await store.accept(draft(None))
    no_id_2 = await store.accept(draft(None))  # without ids nothing can be deduplicated
    assert no_id_1 is not None and no_id_2 is not None
    found = await store.by_message("telegram", "-100", "m1")
    assert found is not None and found.id == first.id


async def test_only_one_answerer_wins(intake: tuple[IntakeStore, Database]) -> None:
    store, database = intake
    entry = await store.accept(draft())
    assert entry is not None
    await database.write(lambda conn: claim_in(conn, entry.id))
    await database.write(lambda conn: settle_in(conn, entry.id, "answered", 42, user_turn_id=41))
    with pytest.raises(IntakeConflict):  # a second answerer's claim is refused...
        await database.write(lambda conn: claim_in(conn, entry.id))
    with pytest.raises(IntakeConflict):  # ...and so is its reply
        await database.write(lambda conn: settle_in(conn, entry.id, "answered", 43))
    got = await store.get(entry.id)
    assert got is not None
    assert (got.state, got.attempts, got.user_turn_id, got.reply_turn_id) == (
        "answered",
        1,
        41,
        42,
    )
    assert await store.move(entry.id, "delivered", expected=["answered"], delivery={"ids": [9]})
    assert not await store.move(entry.id, "delivered", expected=["answered"])
    got = await store.get(entry.id)
    assert got is not None and got.state == "delivered" and got.delivery == {"ids": [9]}


async def test_open_entries_expiry_and_stats(intake: tuple[IntakeStore, Database]) -> None:
    store, _ = intake
    now = datetime.now(UTC)
    old = await store.accept(draft("old", received_at=now - timedelta(hours=2)))
    fresh = await store.accept(draft("fresh", received_at=now - timedelta(seconds=5)))
    done = await store.accept(draft("done"))
    assert old is not None and fresh is not None and done is not None
    assert await store.move(done.id, "failed", expected=["pending"])
    assert [e.id for e in await store.open_entries()] == [old.id, fresh.id]
    stats = await store.stats()
    assert stats.pending == 2 and stats.oldest_pending is not None
    assert abs((stats.oldest_pending - old.received_at).total_seconds()) < 1
    assert await store.expire(now - timedelta(minutes=15)) == 1
    assert [e.id for e in await store.open_entries()] == [fresh.id]
    assert [e.id for e in await store.listing("expired")] == [old.id]
