"""memory.chats.settings: per-chat settings on SQLite and PostgreSQL (the `storage` fixture).

What the `/bot` commands and the console rely on: defaults without a row, partial
updates that keep the rest, a reset that keeps access, checks with clear refusals and
nothing written, concurrent changes that all land, paging through the chats.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory.chats.settings import (
    PERSONA_MAX_CHARS,
    WAKE_WORD_MAX_CHARS,
    WAKE_WORDS_MAX,
    Change,
    ChatSettings,
    ChatSettingsError,
)
from memory.turns.store import SqlStorage, open_storage

GROUP = ("telegram", "-100500")
ADMIN = "telegram:1"


async def test_a_chat_without_a_row_has_the_defaults(storage: SqlStorage) -> None:
    found = await storage.chat_settings.get(*GROUP)
    assert found == ChatSettings("telegram", "-100500")
    assert (found.enabled, found.allowed, found.persona, found.wake_words) == (True, None, "", ())
    assert found.id is None and str(found.chat_key) == "telegram:-100500"
    assert await storage.chat_settings.listing() == []


async def test_update_sets_what_it_names_keeps_the_rest_and_survives_reopen(
    storage: SqlStorage, database_url: str
) -> None:
    store = storage.chat_settings
    first = await store.update(*GROUP, by=ADMIN, enabled=False)
    assert (first.enabled, first.allowed, first.updated_by) == (False, None, ADMIN)
    assert first.id is not None and first.updated_at is not None
    second = await store.update(
        *GROUP, by="qq:9", persona="  Speak like a pirate.  ", wake_words=["Mochi", "小助手"]
    )
    assert second.enabled is False  # not named: kept
    assert second.persona == "Speak like a pirate."
    assert second.wake_words == ("Mochi", "小助手")
    assert second.updated_by == "qq:9" and second.id == first.id
    assert await store.get(*GROUP) == second

    reopened = await open_storage(database_url)
    try:
        assert await reopened.chat_settings.get(*GROUP) == second
    finally:
        await reopened.close()


async def test_chats_do_not_share_settings(storage: SqlStorage) -> None:
    store = storage.chat_settings
    await store.update("qq", "group:1", by=ADMIN, persona="Group one only.", allowed=True)
    other = await store.get("qq", "group:2")
    assert other == ChatSettings("qq", "group:2")
    assert (await store.get("telegram", "group:1")).persona == ""  # another platform


async def test_reset_clears_persona_and_wake_words_but_keeps_access(storage: SqlStorage) -> None:
    store = storage.chat_settings
    await store.update(
        *GROUP, by=ADMIN, enabled=False, allowed=True, persona="x", wake_words=["mochi"]
    )
    reset = await store.reset(*GROUP, by="telegram:2")
    assert (reset.persona, reset.wake_words) == ("", ())
    assert (reset.enabled, reset.allowed, reset.updated_by) == (False, True, "telegram:2")
    assert await store.get(*GROUP) == reset


async def test_allowed_goes_back_to_the_config_with_none(storage: SqlStorage) -> None:
    store = storage.chat_settings
    assert (await store.update(*GROUP, by=ADMIN, allowed=False)).allowed is False
    assert (await store.update(*GROUP, by=ADMIN, allowed=None)).allowed is None


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"persona": "x" * (PERSONA_MAX_CHARS + 1)}, f"at most {PERSONA_MAX_CHARS}"),
        ({"wake_words": [f"w{n}" for n in range(WAKE_WORDS_MAX + 1)]}, "at most 10 wake words"),
        ({"wake_words": ["y" * (WAKE_WORD_MAX_CHARS + 1)]}, f"{WAKE_WORD_MAX_CHARS} characters"),
        ({"wake_words": ["  "]}, "cannot be empty"),
        ({"wake_words": ["/help"]}, "cannot start with /"),
        ({"wake_words": "mochi"}, "a list of words"),
        ({"enabled": "yes"}, "true or false"),
        ({"allowed": 1}, "true, false or none"),
        ({"colour": "red"}, "unknown chat setting(s): colour"),
    ],
)
async def test_bad_values_are_refused_clearly_and_nothing_is_written(
    storage: SqlStorage, changes: dict[str, Any], says: str
) -> None:
    store = storage.chat_settings
    with pytest.raises(ChatSettingsError, match=says.replace("(", r"\(").replace(")", r"\)")):
        await store.update(*GROUP, by=ADMIN, **changes)
    assert await store.listing() == []  # not even an empty row


async def test_a_refused_change_inside_modify_writes_nothing(storage: SqlStorage) -> None:
    def refuse(current: ChatSettings) -> dict[str, object]:
        raise ChatSettingsError("no")

    with pytest.raises(ChatSettingsError):
        await storage.chat_settings.modify(*GROUP, by=ADMIN, change=refuse)
    assert await storage.chat_settings.listing() == []


async def test_the_limits_themselves_fit(storage: SqlStorage) -> None:
    words = [f"{n}" + "w" * (WAKE_WORD_MAX_CHARS - 1) for n in range(WAKE_WORDS_MAX)]
    saved = await storage.chat_settings.update(
        *GROUP, by=ADMIN, persona="p" * PERSONA_MAX_CHARS, wake_words=words
    )
    assert len(saved.persona) == PERSONA_MAX_CHARS and saved.wake_words == tuple(words)


async def test_duplicate_wake_words_ignoring_case_are_kept_once(storage: SqlStorage) -> None:
    saved = await storage.chat_settings.update(
        *GROUP, by=ADMIN, wake_words=["Mochi", "mochi", " hey   bot "]
    )
    assert saved.wake_words == ("Mochi", "hey bot")


async def test_missing_author_or_bad_chat_is_refused(storage: SqlStorage) -> None:
    with pytest.raises(ChatSettingsError, match="`by`"):
        await storage.chat_settings.update(*GROUP, by=" ", enabled=False)
    with pytest.raises(ValueError, match="platform"):
        await storage.chat_settings.get("", "x")


async def test_concurrent_read_modify_write_changes_all_land(storage: SqlStorage) -> None:
    """Each change sees the one before (the row is locked), so no wake word is lost."""

    def adding(word: str) -> Change:
        return lambda current: {"wake_words": [*current.wake_words, word]}

    store = storage.chat_settings
    words = [f"word{n}" for n in range(6)]
    await asyncio.gather(*(store.modify(*GROUP, by=ADMIN, change=adding(w)) for w in words))
    assert sorted((await store.get(*GROUP)).wake_words) == words


async def test_listing_pages_in_row_order(storage: SqlStorage) -> None:
    store = storage.chat_settings
    for n in range(5):
        await store.update("qq", f"group:{n}", by=ADMIN, enabled=n % 2 == 0)
    first = await store.listing(limit=2)
    assert [s.chat_id for s in first] == ["group:0", "group:1"]
    rest = await store.listing(limit=10, after_id=first[-1].id)
    assert [s.chat_id for s in rest] == ["group:2", "group:3", "group:4"]
    assert [s.enabled for s in rest] == [True, False, True]
    assert await store.listing(limit=0) == []
    with pytest.raises(ValueError):
        await store.listing(limit=-1)
