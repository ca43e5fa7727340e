"""Long-term memory rows: isolation, dedupe, row checks, delete/clear, batches with times.

The rules on top (length, count, numbering, JSON Lines) are tests/memory/test_memory_service.py's.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.memories.types import NewMemory
from memory.turns.store import SqlStorage
from memory.turns.types import NewTurn


async def _contents(storage: SqlStorage, platform: str, user_id: str) -> list[str]:
    return [m.content for m in await storage.list_memories(platform, user_id)]


async def test_add_and_list_newest_first(storage: SqlStorage) -> None:
    first = await storage.add_memory("telegram", "1", "  likes green tea  ", "telegram:1")
    second = await storage.add_memory("telegram", "1", "lives in Lyon", "telegram:99")
    assert first is not None and second is not None
    assert first.content == "likes green tea"  # stripped
    assert (first.platform, first.user_id, first.author) == ("telegram", "1", "telegram:1")
    assert first.created_at.tzinfo is not None
    listed = await storage.list_memories("telegram", "1")
    assert [m.content for m in listed] == ["lives in Lyon", "likes green tea"]
    assert listed[1] == first


async def test_memories_are_isolated_per_user_and_platform(storage: SqlStorage) -> None:
    await storage.add_memory("telegram", "1", "alice's secret", "telegram:1")
    await storage.add_memory("telegram", "2", "bob's secret", "telegram:2")
    await storage.add_memory("qq", "1", "qq user 1's secret", "qq:1")
    assert await _contents(storage, "telegram", "1") == ["alice's secret"]
    assert await _contents(storage, "telegram", "2") == ["bob's secret"]
    assert await _contents(storage, "qq", "1") == ["qq user 1's secret"]
    assert await storage.clear_memories("telegram", "1") == 1
    assert await _contents(storage, "telegram", "2") == ["bob's secret"]
    assert await _contents(storage, "qq", "1") == ["qq user 1's secret"]
    assert await _contents(storage, "telegram", "never-seen") == []


async def test_duplicates_are_ignored_per_user(storage: SqlStorage) -> None:
    assert await storage.add_memory("http", "u1", "Likes  Tea", "http:u1") is not None
    assert await storage.add_memory("http", "u1", "likes tea", "http:u1") is None
    assert await storage.add_memory("http", "u1", "\tLIKES TEA\n", "model") is None
    assert await storage.add_memory("http", "u2", "likes tea", "http:u2") is not None
    assert await _contents(storage, "http", "u1") == ["Likes  Tea"]


async def test_row_checks_strip_and_refuse_empty_text(storage: SqlStorage) -> None:
    exact = "x" * 500
    assert await storage.add_memory("qq", "1", f"  {exact}  ", "qq:1") is not None
    with pytest.raises(ValueError, match="empty"):
        await storage.add_memory("qq", "1", " \n\t ", "qq:1")
    with pytest.raises(ValueError, match="author"):
        await storage.add_memory("qq", "1", "fine", "")
    with pytest.raises(ValueError, match="id must be"):
        await storage.add_memory("qq", "", "fine", "qq:1")
    assert await _contents(storage, "qq", "1") == [exact]


async def test_delete_one_only_for_its_owner(storage: SqlStorage) -> None:
    mine = await storage.add_memory("telegram", "1", "mine", "telegram:1")
    theirs = await storage.add_memory("telegram", "2", "theirs", "telegram:2")
    assert mine is not None and theirs is not None
    assert await storage.delete_memory("telegram", "1", theirs.id) is False
    assert await storage.delete_memory("qq", "2", theirs.id) is False
    assert await _contents(storage, "telegram", "2") == ["theirs"]
    assert await storage.delete_memory("telegram", "1", mine.id) is True
    assert await storage.delete_memory("telegram", "1", mine.id) is False
    assert await _contents(storage, "telegram", "1") == []
    # Ids are never reused, so a stale id cannot hit a newer memory.
    again = await storage.add_memory("telegram", "1", "mine", "telegram:1")
    assert again is not None and again.id > mine.id


async def test_clear_counts_and_leaves_history(storage: SqlStorage) -> None:
    for fact in ("a", "b", "c"):
        await storage.add_memory("console", "me", fact, "console:me")
    await storage.add_turn(
        NewTurn("console", "me", "private", "user", "message", "hi", 1, sender_id="me")
    )
    assert await storage.clear_memories("console", "me") == 3
    assert await storage.clear_memories("console", "me") == 0
    assert await _contents(storage, "console", "me") == []
    assert len(await storage.recent_turns("console", "me", 5)) == 1


async def test_add_memories_keeps_authors_and_times_and_skips_what_is_known(
    storage: SqlStorage,
) -> None:
    await storage.add_memory("qq", "5", "known", "qq:5")
    batch = [
        NewMemory("old", "a", datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)),
        NewMemory("naive", "b", datetime(2021, 6, 1)),
        NewMemory("  KNOWN ", "c"),
        NewMemory("new", "d"),
    ]
    added = await storage.add_memories("qq", "5", batch)
    assert [(m.content, m.author) for m in added] == [("old", "a"), ("naive", "b"), ("new", "d")]
    by_text = {m.content: m for m in await storage.list_memories("qq", "5")}
    assert by_text["old"].created_at == datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert by_text["naive"].created_at == datetime(2021, 6, 1, tzinfo=UTC)  # naive is UTC
    assert by_text["known"].author == "qq:5"
    assert [m.content for m in await storage.list_memories("qq", "5")][-2:] == ["naive", "old"]
    assert await storage.add_memories("qq", "5", batch) == []
    assert await storage.add_memories("qq", "5", []) == []


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (NewMemory("   ", "a"), "memory 2: content is empty"),
        (NewMemory(5, "a"), "memory 2: content must be text"),  # type: ignore[arg-type]
        (NewMemory("ok", ""), "memory 2: author"),
        (NewMemory("ok", "x" * 201), "memory 2: author"),
    ],
)
async def test_a_bad_memory_in_a_batch_stores_none(
    storage: SqlStorage, bad: NewMemory, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await storage.add_memories("telegram", "3", [NewMemory("good one", "a"), bad])
    assert await _contents(storage, "telegram", "3") == []


async def test_memory_for_a_user_seen_later_in_chat(storage: SqlStorage) -> None:
    """An admin may add a memory before the user ever talks; the rows must join up."""
    await storage.add_memory("telegram", "55", "prefers short answers", "telegram:1")
    turn = NewTurn(
        "telegram", "g", "group", "user", "message", "hi", 1, sender_id="55", sender_name="Eve"
    )
    await storage.add_turn(turn)
    [stored] = await storage.recent_turns("telegram", "g", 5)
    assert stored.sender_name == "Eve"
    assert await _contents(storage, "telegram", "55") == ["prefers short answers"]
