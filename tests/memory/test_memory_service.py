"""The memory rules (memory.memories.service) on real storage: one line of at most 500 characters,
at most 200 per person, the same memory once, numbered newest first, JSON Lines export and
import under the same limits, and one audit line per change without the memory's text."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from memory.memories.service import (
    MAX_CHARS,
    MAX_PER_USER,
    MemoryRefused,
    MemoryService,
    numbered_lines,
)
from memory.memories.types import NewMemory
from memory.turns.store import SqlStorage


@pytest.fixture
def memories(storage: SqlStorage) -> MemoryService:
    return MemoryService(storage)


async def _contents(memories: MemoryService, platform: str, user_id: str) -> list[str]:
    return [m.content for m in await memories.numbered(platform, user_id)]


async def _fill(storage: SqlStorage, platform: str, user_id: str, count: int) -> None:
    rows = [NewMemory(f"fact number {n}", "test") for n in range(count)]
    assert len(await storage.add_memories(platform, user_id, rows)) == count


def test_the_limits() -> None:
    assert (MAX_CHARS, MAX_PER_USER) == (500, 200)


async def test_add_makes_one_line_and_knows_the_same_memory(memories: MemoryService) -> None:
    item = await memories.add("http", "u1", "  Likes \n green\ttea  ", author="http:u1")
    assert item is not None and item.content == "Likes green tea" and item.author == "http:u1"
    assert await memories.add("http", "u1", "LIKES GREEN TEA", author="model") is None
    assert await memories.add("http", "u1", "likes  green tea\n", author="cli") is None
    assert await memories.add("http", "u2", "likes green tea", author="http:u2") is not None
    assert await _contents(memories, "http", "u1") == ["Likes green tea"]


async def test_add_length_limit_and_empty_text(memories: MemoryService) -> None:
    exact = "x" * MAX_CHARS
    assert await memories.add("qq", "1", f"  {exact}  ", author="qq:1") is not None
    with pytest.raises(MemoryRefused) as refused:
        await memories.add("qq", "1", "y" * (MAX_CHARS + 1), author="qq:1")
    assert str(refused.value) == (
        "Not saved: 501 characters is over the limit of 500. Keep memories short."
    )
    with pytest.raises(MemoryRefused, match="^Nothing to remember: the text was empty.$"):
        await memories.add("qq", "1", " \n\t ", author="qq:1")
    with pytest.raises(MemoryRefused, match="^Not saved: memory user: id must be"):
        await memories.add("qq", "x" * 200, "fine", author="qq:1")
    assert await _contents(memories, "qq", "1") == [exact]


async def test_add_at_the_cap_is_refused_but_a_known_memory_is_not(
    storage: SqlStorage, memories: MemoryService
) -> None:
    await _fill(storage, "telegram", "1", MAX_PER_USER - 1)
    assert await memories.add("telegram", "1", "the last one", author="model") is not None
    with pytest.raises(MemoryRefused) as refused:
        await memories.add("telegram", "1", "one too many", author="telegram:1")
    assert str(refused.value) == (
        "Not saved: 200 memories is the limit for one person. "
        "Remove some first with /memory forget <n>."
    )
    assert await memories.add("telegram", "1", "The last  one", author="model") is None
    assert len(await memories.numbered("telegram", "1")) == MAX_PER_USER
    assert await memories.add("telegram", "2", "someone else", author="telegram:2") is not None


async def test_numbered_newest_first_and_forget_by_number(memories: MemoryService) -> None:
    for fact in ("a", "b", "c"):
        await memories.add("console", "me", fact, author="console:me")
    items = await memories.numbered("console", "me")
    assert numbered_lines(items) == ["1. c", "2. b", "3. a"]
    forgotten = await memories.forget_number("console", "me", 2, by="console:me")
    assert forgotten.content == "b"
    assert numbered_lines(await memories.numbered("console", "me")) == ["1. c", "2. a"]
    for number in (0, 3, -1):
        with pytest.raises(MemoryRefused) as refused:
            await memories.forget_number("console", "me", number, by="console:me")
        assert str(refused.value) == f"There is no item {number}; there are 2 item(s)."
    assert await _contents(memories, "console", "me") == ["c", "a"]


async def test_forget_by_text_matches_ignoring_case_and_spacing(memories: MemoryService) -> None:
    for fact in ("Lives on Hauptstraße 5", "Owns a cat called Ünal", "100% sure about 50_50 odds"):
        await memories.add("qq", "7", fact, author="qq:7")
    await memories.add("qq", "8", "Owns a dog called Ünal", author="qq:8")

    async def forget(text: str) -> tuple[list[str], bool]:
        found = await memories.forget_text("qq", "7", text, by="model")
        return [m.content for m in found.matches], found.removed

    assert await forget("dog") == ([], False)  # another person's memory is not seen
    assert await forget("%") == (["100% sure about 50_50 odds"], True)  # no LIKE wildcards
    assert await forget("HAUPTSTRASSE") == (["Lives on Hauptstraße 5"], True)
    assert await forget("ünal") == (["Owns a cat called Ünal"], True)
    with pytest.raises(MemoryRefused, match="^Nothing to forget: the text was empty.$"):
        await forget("   ")
    assert await _contents(memories, "qq", "7") == []
    assert await _contents(memories, "qq", "8") == ["Owns a dog called Ünal"]


async def test_forget_by_text_prefers_the_same_memory_and_refuses_to_guess(
    memories: MemoryService,
) -> None:
    for fact in ("likes tea", "likes tea a lot", "likes black tea"):
        await memories.add("telegram", "1", fact, author="telegram:1")
    found = await memories.forget_text("telegram", "1", "tea", by="model")
    assert [m.content for m in found.matches] == ["likes black tea", "likes tea a lot", "likes tea"]
    assert found.removed is False and len(await memories.numbered("telegram", "1")) == 3
    found = await memories.forget_text("telegram", "1", "Likes  TEA", by="model")
    assert [m.content for m in found.matches] == ["likes tea"] and found.removed
    assert await _contents(memories, "telegram", "1") == ["likes black tea", "likes tea a lot"]


async def test_clear_counts(memories: MemoryService) -> None:
    for fact in ("a", "b"):
        await memories.add("console", "me", fact, author="console:me")
    assert await memories.clear("console", "me", by="console:me") == 2
    assert await memories.clear("console", "me", by="console:me") == 0


async def test_export_import_round_trip(storage: SqlStorage, memories: MemoryService) -> None:
    await memories.add("telegram", "1", "likes tea", author="telegram:1")
    # Imported texts are kept as exported, line breaks included.
    await storage.add_memory("telegram", "1", 'quotes "x" and\nnewlines', "telegram:42")
    lines = await memories.export_jsonl("telegram", "1")
    rows = [json.loads(line) for line in lines]
    assert [row["content"] for row in rows] == ["likes tea", 'quotes "x" and\nnewlines']
    assert set(rows[0]) == {"content", "author", "created_at"}
    assert all("\n" not in line for line in lines)  # one JSON object per line

    assert await memories.import_jsonl("http", "u9", lines, by="cli") == 2
    assert await memories.export_jsonl("http", "u9") == lines  # authors and times kept
    # Importing again adds nothing; a mix adds only what is new; blank lines are skipped.
    assert await memories.import_jsonl("http", "u9", lines, by="cli") == 0
    more = [*lines, "", '{"content": "new"}\n']
    assert await memories.import_jsonl("http", "u9", more, by="cli") == 1
    newest = (await memories.numbered("http", "u9"))[0]
    assert (newest.content, newest.author) == ("new", "import")
    assert await memories.import_jsonl("http", "u9", [], by="cli") == 0


async def test_import_keeps_times_and_treats_naive_as_utc(memories: MemoryService) -> None:
    rows = [
        {"content": "old", "author": "a", "created_at": "2020-01-02T03:04:05+02:00"},
        {"content": "naive", "author": "a", "created_at": "2021-06-01T00:00:00"},
        {"content": "zulu", "author": "a", "created_at": "2022-01-01T00:00:00Z"},
    ]
    lines = [json.dumps(row) for row in rows]
    assert await memories.import_jsonl("qq", "5", lines, by="cli") == 3
    by_text = {m.content: m.created_at for m in await memories.numbered("qq", "5")}
    assert by_text["old"] == datetime(2020, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert by_text["naive"] == datetime(2021, 6, 1, tzinfo=UTC)
    assert await _contents(memories, "qq", "5") == ["zulu", "naive", "old"]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('"just a string"', "line 2: expected an object"),
        ("{not json", "line 2: not valid JSON"),
        ('{"author": "a"}', "line 2: content must be text"),
        ('{"content": 5}', "line 2: content must be text"),
        ('{"content": "   "}', "line 2: content is empty"),
        (json.dumps({"content": "z" * 501}), "line 2: 501 characters is over the limit of 500"),
        ('{"content": "ok", "author": ""}', "line 2: author"),
        ('{"content": "ok", "created_at": "yesterday"}', "line 2: created_at"),
        ('{"content": "ok", "created_at": 1700000000}', "line 2: created_at"),
    ],
)
async def test_bad_import_line_imports_nothing(
    memories: MemoryService, bad_line: str, message: str
) -> None:
    with pytest.raises(MemoryRefused, match=message):
        await memories.import_jsonl(
            "telegram", "3", ['{"content": "good one"}', bad_line], by="cli"
        )
    assert await _contents(memories, "telegram", "3") == []


async def test_import_past_the_cap_imports_nothing(
    storage: SqlStorage, memories: MemoryService
) -> None:
    await _fill(storage, "qq", "9", MAX_PER_USER - 2)
    known = json.dumps({"content": "Fact number 0"})  # already there: does not count
    two_new = [known, '{"content": "new 1"}', '{"content": "new 2"}', '{"content": "NEW  1"}']
    three_new = [*two_new, '{"content": "new 3"}']
    with pytest.raises(MemoryRefused) as refused:
        await memories.import_jsonl("qq", "9", three_new, by="cli")
    assert str(refused.value) == (
        "Not imported: 198 memories and 3 new ones would be over the limit of 200 for one "
        "person. Nothing was imported."
    )
    assert len(await memories.numbered("qq", "9")) == MAX_PER_USER - 2
    assert await memories.import_jsonl("qq", "9", two_new, by="cli") == 2
    assert len(await memories.numbered("qq", "9")) == MAX_PER_USER


async def test_every_change_is_audited_without_the_text(
    memories: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memory.memories.service")
    added = await memories.add("telegram", "2", "secret allergy", author="telegram:1")
    assert added is not None
    assert await memories.add("telegram", "2", "secret allergy", author="telegram:1") is None
    await memories.forget_number("telegram", "2", 1, by="telegram:1")
    await memories.import_jsonl("telegram", "2", ['{"content": "secret two"}'], by="cli")
    await memories.clear("telegram", "2", by="model")
    await memories.clear("telegram", "2", by="model")  # nothing left: no change, no line
    assert [r.getMessage() for r in caplog.records] == [
        f"memory #{added.id} added for telegram:2 by telegram:1",
        f"memory #{added.id} of telegram:2 forgotten by telegram:1",
        "1 memories imported for telegram:2 by cli",
        "1 memories of telegram:2 cleared by model",
    ]
    assert "secret" not in caplog.text
