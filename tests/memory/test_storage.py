"""Storage: migrations, restart, turns (duplicates, atomicity, paging), concurrency, locks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect
from sqlalchemy.exc import StatementError

from memory.db.migrate import (
    Database,
    alembic_config,
    head_revision,
    parse_url,
    revision_of,
    upgrade,
)
from memory.schema import Base, described_by_models
from memory.turns.store import SqlStorage, open_storage
from memory.turns.types import NewTurn

TABLES = {"users", "chats", "turns", "memories", "alembic_version"}


def turn(
    chat: str = "c1",
    content: str = "hello",
    *,
    mid: str | None = None,
    sender: str | None = "u1",
    name: str | None = "Alice",
    role: str = "user",
    platform: str = "telegram",
    **extra: object,
) -> NewTurn:
    fields: dict[str, object] = {
        "platform": platform,
        "chat_id": chat,
        "chat_type": "group",
        "role": role,
        "kind": "message",
        "content": content,
        "token_count": 3,
        "sender_id": sender,
        "sender_name": name,
        "platform_message_id": mid,
    }
    fields.update(extra)
    return NewTurn(**fields)  # type: ignore[arg-type]


async def _schema_state(url: str) -> tuple[set[str], str | None, list[object]]:
    """Tables, recorded revision, and the diff between models and the migrated schema."""

    def inspect_sync(conn: Connection) -> tuple[set[str], str | None, list[object]]:
        tables = set(inspect(conn).get_table_names())
        context = MigrationContext.configure(conn, opts={"include_name": described_by_models})
        diff = compare_metadata(context, Base.metadata)
        return tables, revision_of(conn), diff

    database = Database(parse_url(url), pool_size=1)
    try:
        return await database.read(inspect_sync)
    finally:
        await database.close()


def _touch(url: str) -> None:
    path = Path(parse_url(url).url.database or "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


# -- migrations -------------------------------------------------------------------------


async def test_migrations_create_schema_matching_models(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        _touch(database_url)  # an existing, empty file
    store = await open_storage(database_url)
    await store.close()
    tables, revision, diff = await _schema_state(database_url)
    assert TABLES <= tables
    assert revision == head_revision() is not None
    assert diff == []  # the models describe exactly what the migrations built


def test_upgrade_twice_is_a_noop_and_keeps_data(database_url: str) -> None:
    upgrade(database_url)

    async def write_then_read() -> int:
        store = await open_storage(database_url, migrate=False)
        try:
            await store.add_turn(turn(mid="1"))
            upgrade_again = asyncio.to_thread(upgrade, database_url)
            await upgrade_again
            return len(await store.recent_turns("telegram", "c1", 10))
        finally:
            await store.close()

    assert asyncio.run(write_then_read()) == 1
    tables, revision, diff = asyncio.run(_schema_state(database_url))
    assert TABLES <= tables and revision == head_revision() and diff == []


def test_alembic_driven_directly_uses_the_same_migrations(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`alembic upgrade` with only sqlalchemy.url set (no connection handed over)."""
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    command.upgrade(config, "head", sql=True)  # offline: prints the DDL
    assert "CREATE TABLE turns" in capsys.readouterr().out
    command.upgrade(config, "head")
    tables, revision, diff = asyncio.run(_schema_state(database_url))
    assert TABLES <= tables and revision == head_revision() and diff == []


def test_sqlite_creates_parent_folder_and_uses_wal(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "er" / "bot.sqlite"
    upgrade(f"sqlite:///{db}")
    import sqlite3

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
def test_both_sqlite_url_forms_migrate_the_same_file(tmp_path: Path, scheme: str) -> None:
    """sqlite:// is the spelling to use; sqlite+aiosqlite:// from older configs means the same."""
    db = tmp_path / "data" / "bot.sqlite"
    url = f"{scheme}:///{db}"
    assert parse_url(url).url.render_as_string() == f"sqlite:///{db}"
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", url)
    command.upgrade(config, "head")  # Alembic driven directly, without chatterd's connection
    other = "sqlite+aiosqlite" if scheme == "sqlite" else "sqlite"

    async def write_then_read_with_the_other_form() -> list[str]:
        store = await open_storage(url, migrate=False)
        try:
            await store.add_turn(turn(content="written", mid="1"))
        finally:
            await store.close()
        store = await open_storage(f"{other}:///{db}", migrate=False)
        try:
            return [t.content for t in await store.recent_turns("telegram", "c1", 10)]
        finally:
            await store.close()

    assert asyncio.run(write_then_read_with_the_other_form()) == ["written"]
    upgrade(f"{other}:///{db}")  # already at head under either spelling
    tables, revision, diff = asyncio.run(_schema_state(url))
    assert TABLES <= tables and revision == head_revision() and diff == []


async def test_open_without_migrate_on_empty_database_says_what_to_run(database_url: str) -> None:
    with pytest.raises(RuntimeError, match="chatterd db upgrade"):
        await open_storage(database_url, migrate=False)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql+aiomysql://x/y", "must start with"),
        ("postgresql://x/y", "must start with"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://", "in-memory"),
        ("sqlite+aiosqlite:///:memory:", "in-memory"),
        ("sqlite+aiosqlite://", "in-memory"),
        ("sqlite:///x.db?search_path=a", "PostgreSQL only"),
        ("sqlite+aiosqlite:///x.db?search_path=a", "PostgreSQL only"),
        ("not a url", "not a valid"),
    ],
)
async def test_bad_urls_are_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await open_storage(url)


async def test_restart_keeps_history(database_url: str) -> None:
    store = await open_storage(database_url)
    await store.add_turns([turn(content="one", mid="1"), turn(content="two", role="assistant")])
    await store.close()
    store = await open_storage(database_url)
    try:
        turns = await store.recent_turns("telegram", "c1", 10)
        assert [(t.content, t.role) for t in turns] == [("one", "user"), ("two", "assistant")]
        assert turns[0].sender_id == "u1" and turns[0].sender_name == "Alice"
        assert await store.add_turn(turn(content="one again", mid="1")) is None
    finally:
        await store.close()


# -- turns ------------------------------------------------------------------------------


async def test_add_turn_round_trip(storage: SqlStorage) -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=8)))
    stored = await storage.add_turn(
        turn(content="héllo 🌍", mid="m1", meta={"images": 1}, created_at=when)
    )
    assert stored is not None and stored.created_at == when
    [read] = await storage.recent_turns("telegram", "c1", 5)
    assert read == stored
    assert read.created_at.tzinfo is not None and read.created_at.utcoffset() == timedelta(0)
    assert read.meta == {"images": 1} and read.platform_message_id == "m1"


async def test_naive_times_are_utc_and_missing_times_are_now(storage: SqlStorage) -> None:
    before = datetime.now(UTC)
    await storage.add_turn(turn(created_at=datetime(2024, 1, 1, 8, 30)))
    await storage.add_turn(turn())
    old, new = await storage.recent_turns("telegram", "c1", 5)
    assert old.created_at == datetime(2024, 1, 1, 8, 30, tzinfo=UTC)
    assert new.created_at >= before


async def test_duplicate_message_ids_are_stored_once(storage: SqlStorage) -> None:
    first = await storage.add_turn(turn(content="a", mid="42"))
    assert first is not None
    assert await storage.add_turn(turn(content="a", mid="42", name="Renamed")) is None
    # The same platform id in another chat is another message.
    assert await storage.add_turn(turn(chat="c2", content="b", mid="42")) is not None
    assert [t.content for t in await storage.recent_turns("telegram", "c1", 10)] == ["a"]
    # The rolled-back duplicate left nothing behind, not even the new display name.
    [again] = await storage.recent_turns("telegram", "c1", 10)
    assert again.sender_name == "Alice"
    # Turns without a platform id are never duplicates.
    assert await storage.add_turn(turn(content="x")) is not None
    assert await storage.add_turn(turn(content="x")) is not None


async def test_display_name_follows_the_latest_turn(storage: SqlStorage) -> None:
    await storage.add_turn(turn(content="1", name="Alice"))
    await storage.add_turn(turn(content="2", name="Alice B."))
    await storage.add_turn(turn(content="3", name=None))
    turns = await storage.recent_turns("telegram", "c1", 10)
    assert {t.sender_name for t in turns} == {"Alice B."}


async def test_add_turns_is_all_or_nothing(storage: SqlStorage) -> None:
    batch = [
        turn(chat="new-chat", sender="new-user", content="1"),
        turn(chat="new-chat", sender="new-user", content="2"),
        turn(chat="new-chat", content="3", meta={"bad": object()}),  # fails in the database
    ]
    with pytest.raises(StatementError):
        await storage.add_turns(batch)
    assert await storage.recent_turns("telegram", "new-chat", 10) == []
    # Row ids from the rolled-back batch must not linger in the cache: another chat now
    # takes the freed ids, and the first chat must still get rows of its own.
    await storage.add_turn(turn(chat="other", sender="other-user", content="o"))
    stored = await storage.add_turns(batch[:2])
    assert [t.content for t in stored] == ["1", "2"]
    assert [t.content for t in await storage.recent_turns("telegram", "new-chat", 10)] == ["1", "2"]
    [other] = await storage.recent_turns("telegram", "other", 10)
    assert other.content == "o" and other.sender_id == "other-user"


async def test_add_turns_skips_duplicates_and_keeps_order(storage: SqlStorage) -> None:
    await storage.add_turn(turn(content="seen", mid="1"))
    stored = await storage.add_turns(
        [turn(content="seen", mid="1"), turn(content="a", mid="2"), turn(content="b", role="tool")]
    )
    assert [t.content for t in stored] == ["a", "b"]
    assert stored[0].id < stored[1].id
    assert await storage.add_turns([]) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"role": "robot"}, "role"),
        ({"kind": "chatter"}, "kind"),
        ({"chat_type": "channel"}, "chat_type"),
        ({"token_count": -1}, "token_count"),
        ({"token_count": True}, "token_count"),
        ({"chat_id": ""}, "id must be"),
        ({"sender_id": "x" * 129}, "id must be"),
        ({"platform": ""}, "platform"),
        ({"platform_message_id": ""}, "platform_message_id"),
        ({"content": None}, "content"),
        ({"meta": []}, "meta"),
    ],
)
async def test_bad_turns_are_refused_before_writing(
    storage: SqlStorage, change: dict[str, object], message: str
) -> None:
    bad = turn(**change)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        await storage.add_turns([turn(content="fine"), bad])
    with pytest.raises(ValueError, match=message):
        await storage.add_turn(bad)
    assert await storage.recent_turns("telegram", "c1", 10) == []


async def test_text_is_kept_exactly_except_nul(storage: SqlStorage) -> None:
    content = "line1\nline2\t<b>'; DROP TABLE turns; --\x00end"
    stored = await storage.add_turn(turn(content=content, name="N\x00ame" + "x" * 300))
    [read] = await storage.recent_turns("telegram", "c1", 1)
    assert read.content == stored.content == content.replace("\x00", "\ufffd")  # type: ignore[union-attr]
    assert read.sender_name is not None and len(read.sender_name) == 256


async def test_recent_turns_order_limit_and_paging(storage: SqlStorage) -> None:
    for n in range(10):
        await storage.add_turn(turn(content=str(n), mid=str(n)))
    await storage.add_turn(turn(chat="c2", content="elsewhere"))
    last3 = await storage.recent_turns("telegram", "c1", 3)
    assert [t.content for t in last3] == ["7", "8", "9"]
    page = await storage.recent_turns("telegram", "c1", 3, before_id=last3[0].id)
    assert [t.content for t in page] == ["4", "5", "6"]
    first = await storage.recent_turns("telegram", "c1", 50, before_id=page[0].id)
    assert [t.content for t in first] == ["0", "1", "2", "3"]
    assert await storage.recent_turns("telegram", "c1", 0) == []
    assert await storage.recent_turns("telegram", "nope", 5) == []
    assert await storage.recent_turns("qq", "c1", 5) == []  # chats are keyed by platform too
    with pytest.raises(ValueError, match="limit"):
        await storage.recent_turns("telegram", "c1", -1)


async def test_clear_history_only_touches_one_chat(storage: SqlStorage) -> None:
    await storage.add_turns([turn(content="a", mid="1"), turn(content="b")])
    await storage.add_turn(turn(chat="c2", content="keep"))
    await storage.add_memory("telegram", "u1", "likes tea", "telegram:u1")
    assert await storage.clear_history("telegram", "c1") == 2
    assert await storage.recent_turns("telegram", "c1", 10) == []
    assert [t.content for t in await storage.recent_turns("telegram", "c2", 10)] == ["keep"]
    assert [m.content for m in await storage.list_memories("telegram", "u1")] == ["likes tea"]
    assert await storage.clear_history("telegram", "c1") == 0
    assert await storage.clear_history("telegram", "never-seen") == 0
    # The same message id may arrive again after a reset and is then a new turn.
    assert await storage.add_turn(turn(content="a", mid="1")) is not None


async def test_many_chats_writing_at_once(database_url: str, storage: SqlStorage) -> None:
    """50 chats from two storage instances (think daemon + CLI) all write concurrently."""
    second = await open_storage(database_url)
    try:

        async def chat(n: int) -> None:
            store = storage if n % 2 else second
            for i in range(8):
                stored = await store.add_turn(turn(chat=f"chat{n}", sender=f"u{n}", content=str(i)))
                assert stored is not None
                await store.recent_turns("telegram", f"chat{n}", 4)
            await store.add_turns(
                [turn(chat=f"chat{n}", content="q", mid="q"), turn(chat=f"chat{n}", content="a")]
            )

        await asyncio.gather(*(chat(n) for n in range(50)))
        for n in range(50):
            turns = await storage.recent_turns("telegram", f"chat{n}", 100)
            assert [t.content for t in turns] == [*map(str, range(8)), "q", "a"]
            assert {t.sender_id for t in turns[:8]} == {f"u{n}"}
    finally:
        await second.close()


# -- chat_lock ----------------------------------------------------------------------------


async def test_chat_lock_is_a_noop_on_sqlite(storage: SqlStorage) -> None:
    """One process owns a SQLite file, so the chat lock holds nothing: taking it twice never
    waits, recovery's try-lock finds the chat free meanwhile, and the store stays writable."""
    if storage.dialect != "sqlite":
        pytest.skip("SQLite only")
    async with asyncio.timeout(5):  # a lock that waited would fail here, not hang
        async with storage.chat_lock("telegram", "c1"), storage.chat_lock("telegram", "c1"):
            async with storage.try_chat_lock("telegram", "c1") as free:
                assert free is True
            stored = await storage.add_memory("telegram", "u1", "likes tea", "u1")
    assert stored is not None
    assert [m.content for m in await storage.list_memories("telegram", "u1")] == ["likes tea"]


async def _until_a_lock_waits(storage: SqlStorage) -> None:
    """Wait (deadline 10 s) until some task has asked for a chat's lease and been refused:
    it is then polling for it."""
    refused = asyncio.Event()
    take = storage.leases.take

    async def watched(name: str) -> bool:
        got = await take(name)
        if not got:
            refused.set()
        return got

    storage.leases.take = watched  # type: ignore[method-assign]
    try:
        async with asyncio.timeout(10):
            await refused.wait()
    finally:
        storage.leases.take = take  # type: ignore[method-assign]


async def test_chat_lock_serialises_one_chat_on_postgres(storage: SqlStorage) -> None:
    if storage.dialect != "postgresql":
        pytest.skip("chat leases are PostgreSQL only")
    order: list[str] = []
    a_inside, release_a = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with storage.chat_lock("telegram", "c1"):
            order.append("a-in")
            a_inside.set()
            await release_a.wait()
            order.append("a-out")

    async def second() -> None:
        await a_inside.wait()
        async with storage.chat_lock("telegram", "c1"):
            order.append("b-in")

    tasks = [asyncio.create_task(first()), asyncio.create_task(second())]
    await a_inside.wait()
    await _until_a_lock_waits(storage)  # the second task now waits for the lease
    # Another chat is not held up meanwhile.
    async with asyncio.timeout(10), storage.chat_lock("telegram", "c2"):
        order.append("other-chat")
    assert order == ["a-in", "other-chat"]
    release_a.set()
    async with asyncio.timeout(10):
        await asyncio.gather(*tasks)
    assert order == ["a-in", "other-chat", "a-out", "b-in"]


async def test_chat_lock_is_released_when_the_block_fails(storage: SqlStorage) -> None:
    if storage.dialect != "postgresql":
        pytest.skip("chat leases are PostgreSQL only")
    with pytest.raises(KeyError):
        async with storage.chat_lock("qq", "g1"):
            raise KeyError("boom")
    async with asyncio.timeout(10):
        await _enter_and_leave(storage, "g1")


async def _enter_and_leave(storage: SqlStorage, chat_id: str) -> None:
    async with storage.chat_lock("qq", chat_id):
        pass


async def test_cancelled_lock_wait_does_not_leak_the_lock(storage: SqlStorage) -> None:
    if storage.dialect != "postgresql":
        pytest.skip("chat leases are PostgreSQL only")
    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with storage.chat_lock("qq", "g2"):
            holding.set()
            await release.wait()

    held = asyncio.create_task(holder())
    await holding.wait()
    waiter = asyncio.create_task(_enter_and_leave(storage, "g2"))
    await _until_a_lock_waits(storage)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    await held
    async with asyncio.timeout(10):
        await _enter_and_leave(storage, "g2")  # nobody is left holding it


async def test_turn_material_reads_history_summary_and_only_the_senders_memories(
    storage: SqlStorage,
) -> None:
    stored = await storage.add_turns([turn(content=f"m{i}") for i in range(5)])
    summary = await storage.add_turn(
        turn(content="older talk", role="system", kind="summary", sender=None, name=None)
    )
    await storage.add_turn(turn(chat="other", content="elsewhere", kind="summary", role="system"))
    await storage.add_memory("telegram", "u1", "likes tea", "telegram:u1")
    await storage.add_memory("telegram", "u2", "someone else's fact", "telegram:u2")
    current = await storage.add_turn(turn(content="now"))
    assert summary is not None and current is not None

    got = await storage.turn_material("telegram", "c1", "u1", 3, before_id=current.id)
    # oldest first; the summary comes apart, never as history (it covers nothing here)
    assert [t.content for t in got.history] == ["m3", "m4"]
    assert got.summary is not None and got.summary.id == summary.id and got.summary_through == 0
    assert [m.content for m in got.memories] == ["likes tea"]
    assert got.history[0].id == stored[3].id

    nobody = await storage.turn_material("telegram", "no-such-chat", "u2", 10, before_id=1)
    assert nobody.history == [] and nobody.summary is None
    assert [m.content for m in nobody.memories] == ["someone else's fact"]


async def test_turn_material_finds_the_latest_summary_within_the_read_or_beyond_it(
    storage: SqlStorage,
) -> None:
    """The turn path reads without `before_id`: the summary is taken from the history
    rows when they reach it, and looked up on its own when the read stops short of it."""

    def summary(content: str, through: int) -> NewTurn:
        meta = {"through_id": through}
        return turn(content=content, role="system", kind="summary", sender=None, meta=meta)

    covered = await storage.add_turns([turn(content=f"old{i}") for i in range(2)])
    first = await storage.add_turn(summary("first", covered[-1].id))
    await storage.add_turns([turn(content=f"m{i}") for i in range(4)])
    assert first is not None

    within = await storage.turn_material("telegram", "c1", "u1", 10, None)
    assert within.summary == first and within.summary_through == covered[-1].id
    assert [t.content for t in within.history] == ["m0", "m1", "m2", "m3"]

    beyond = await storage.turn_material("telegram", "c1", "u1", 2, None)  # stops at m2
    assert beyond.summary == first and [t.content for t in beyond.history] == ["m2", "m3"]

    newer = await storage.add_turn(summary("newer", 0))
    latest = await storage.turn_material("telegram", "c1", "u1", 10, None)
    assert latest.summary == newer and latest.summary_through == 0
    assert [t.content for t in latest.history] == ["old0", "old1", "m0", "m1", "m2", "m3"]

    await storage.add_turns([turn(chat="plain", content=f"p{i}") for i in range(3)])
    for limit in (2, 3, 10):  # cut short, exactly full, room to spare: no summary anywhere
        plain = await storage.turn_material("telegram", "plain", "u1", limit, None)
        assert plain.summary is None and plain.summary_through == 0
        assert [t.content for t in plain.history] == ["p0", "p1", "p2"][-limit:]
