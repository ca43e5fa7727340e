"""Long-term memory store: isolation, dedupe, cap, delete/clear, search, export/import."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memory.store import MEMORY_MAX_CHARS, SqlStorage
from memory.types import NewTurn


async def _export(storage: SqlStorage, platform: str, user_id: str) -> list[dict[str, object]]:
    return [row async for row in storage.export_memories(platform, user_id)]


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
    assert await storage.search_memories("telegram", "2", "secret") != []
    assert [m.content for m in await storage.search_memories("telegram", "2", "alice")] == []
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


async def test_length_cap_and_empty_text(storage: SqlStorage) -> None:
    exact = "x" * MEMORY_MAX_CHARS
    assert MEMORY_MAX_CHARS == 500
    assert await storage.add_memory("qq", "1", f"  {exact}  ", "qq:1") is not None
    with pytest.raises(ValueError, match="over the limit of 500"):
        await storage.add_memory("qq", "1", "y" * (MEMORY_MAX_CHARS + 1), "qq:1")
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


async def test_search_is_case_insensitive_substring(storage: SqlStorage) -> None:
    await storage.add_memory("qq", "7", "Lives on Hauptstraße 5", "qq:7")
    await storage.add_memory("qq", "7", "Owns a cat called Ünal", "qq:7")
    await storage.add_memory("qq", "7", "100% sure about 50_50 odds", "qq:7")

    async def found(text: str) -> list[str]:
        return [m.content for m in await storage.search_memories("qq", "7", text)]

    assert await found("HAUPTSTRASSE") == ["Lives on Hauptstraße 5"]
    assert await found("ünal") == ["Owns a cat called Ünal"]
    assert await found("100%") == ["100% sure about 50_50 odds"]  # no LIKE wildcards
    assert await found("%") == ["100% sure about 50_50 odds"]
    assert await found("dog") == []
    with pytest.raises(ValueError, match="empty"):
        await storage.search_memories("qq", "7", "   ")


async def test_export_import_round_trip(storage: SqlStorage) -> None:
    await storage.add_memory("telegram", "1", "likes tea", "telegram:1")
    await storage.add_memory("telegram", "1", 'quotes "x" and\nnewlines', "telegram:42")
    rows = await _export(storage, "telegram", "1")
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]  # JSON Lines
    assert [row["content"] for row in rows] == ["likes tea", 'quotes "x" and\nnewlines']
    assert set(rows[0]) == {"content", "author", "created_at"}

    parsed = [json.loads(line) for line in lines]
    assert await storage.import_memories("http", "u9", parsed) == 2
    assert await _export(storage, "http", "u9") == rows  # authors and times kept
    # Importing again adds nothing; a mix adds only what is new.
    assert await storage.import_memories("http", "u9", parsed) == 0
    assert await storage.import_memories("http", "u9", [*parsed, {"content": "new"}]) == 1
    newest = (await storage.list_memories("http", "u9"))[0]
    assert (newest.content, newest.author) == ("new", "import")
    assert await storage.import_memories("http", "u9", []) == 0


async def test_import_keeps_times_and_treats_naive_as_utc(storage: SqlStorage) -> None:
    rows = [
        {"content": "old", "author": "a", "created_at": "2020-01-02T03:04:05+02:00"},
        {"content": "naive", "author": "a", "created_at": "2021-06-01T00:00:00"},
        {"content": "zulu", "author": "a", "created_at": "2022-01-01T00:00:00Z"},
    ]
    assert await storage.import_memories("qq", "5", rows) == 3
    by_text = {m.content: m.created_at for m in await storage.list_memories("qq", "5")}
    assert by_text["old"] == datetime(2020, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert by_text["naive"] == datetime(2021, 6, 1, tzinfo=UTC)
    assert [m.content for m in await storage.list_memories("qq", "5")] == ["zulu", "naive", "old"]


@pytest.mark.parametrize(
    ("bad_row", "message"),
    [
        ("just a string", "row 2: expected an object"),
        ({"author": "a"}, "row 2: content must be text"),
        ({"content": 5}, "row 2: content must be text"),
        ({"content": "   "}, "row 2: content is empty"),
        ({"content": "z" * 501}, "row 2: 501 characters"),
        ({"content": "ok", "author": ""}, "row 2: author"),
        ({"content": "ok", "created_at": "yesterday"}, "row 2: created_at"),
        ({"content": "ok", "created_at": 1700000000}, "row 2: created_at"),
    ],
)
async def test_bad_import_row_imports_nothing(
    storage: SqlStorage, bad_row: object, message: str
) -> None:
    rows = [{"content": "good one"}, bad_row]
    with pytest.raises(ValueError, match=message):
        await storage.import_memories("telegram", "3", rows)  # type: ignore[arg-type]
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
