"""Chat leases on PostgreSQL: free when nobody holds them, when their time ran out, or at
once when the holder's replica has no session left; and recovery leaves the messages a
live replica accepted to that replica."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from memory.db.migrate import parse_url
from memory.turns.store import SqlStorage, open_storage
from memory.turns.types import IntakeDraft


def test_pgbouncer_is_a_url_option_of_postgresql_only() -> None:
    assert parse_url("postgresql+asyncpg://u@h/db?pgbouncer=true").pgbouncer
    assert not parse_url("postgresql+asyncpg://u@h/db").pgbouncer
    assert "pgbouncer" not in str(parse_url("postgresql+asyncpg://u@h/db?pgbouncer=true").url)
    with pytest.raises(ValueError, match="PostgreSQL only"):
        parse_url("sqlite:///x.sqlite?pgbouncer=true")
    with pytest.raises(ValueError, match="search_path"):
        parse_url("postgresql+asyncpg://u@h/db?pgbouncer=true&search_path=s")


def _postgres_only(storage: SqlStorage) -> None:
    if storage.dialect != "postgresql":
        pytest.skip("leases are PostgreSQL only (one SQLite process orders its own chats)")


async def _plant(storage: SqlStorage, name: str, holder: str, seconds: int) -> None:
    """A lease row as another process left it: `holder`, running out in `seconds`."""
    statement = text(
        "INSERT INTO leases (name, holder, lease_until) "
        "VALUES (:name, :holder, now() + make_interval(secs => :s))"
    )
    params = {"name": name, "holder": holder, "s": seconds}
    await storage.database.write(lambda conn: conn.execute(statement, params))


async def test_a_dead_replicas_lease_is_taken_at_once(database_url: str) -> None:
    storage = await open_storage(database_url, replica="alive1")
    try:
        _postgres_only(storage)
        await _plant(storage, "chat:qq:g1", "gone00", 3600)  # no session of "gone00"
        async with storage.try_chat_lock("qq", "g1") as free:
            assert free
    finally:
        await storage.close()


async def test_a_live_replicas_lease_is_not_taken_until_it_runs_out(database_url: str) -> None:
    first = await open_storage(database_url, replica="first1")
    second = await open_storage(database_url, replica="second")
    try:
        _postgres_only(first)
        async with first.chat_lock("qq", "g1"):
            async with second.try_chat_lock("qq", "g1") as free:
                assert not free  # first's sessions are there: it lives
        async with second.try_chat_lock("qq", "g1") as free:
            assert free  # given back
        await _plant(first, "chat:qq:g2", "first1", -1)  # first's, but it ran out
        async with second.try_chat_lock("qq", "g2") as free:
            assert free
    finally:
        await first.close()
        await second.close()


async def _open_once_all_there(storage: SqlStorage, count: int) -> list[int]:
    for _ in range(100_000):
        found = [e.id for e in await storage.intake.open_entries()]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    return found


def _draft(chat: str) -> IntakeDraft:
    return IntakeDraft("qq", chat, "group", "u1", "u1", "hello", platform_message_id=chat)


async def test_recovery_leaves_a_live_replicas_messages_to_it(database_url: str) -> None:
    first = await open_storage(database_url, replica="first1")
    second = await open_storage(database_url, replica="second")
    try:
        _postgres_only(first)
        mine = await first.intake.accept(_draft("g1"))
        theirs = await second.intake.accept(_draft("g2"))
        assert mine is not None and theirs is not None
        # Turned away under overload, not queued anywhere: whoever has room first.
        spare = await second.intake.accept(_draft("g3"), queued=False)
        assert spare is not None
        assert [e.id for e in await first.intake.open_entries()] == [mine.id, spare.id]
        assert [e.id for e in await second.intake.open_entries()] == [theirs.id, spare.id]
        await second.close()  # its sessions end: what it accepted is anyone's now
        async with asyncio.timeout(10):  # a closed session leaves pg_stat_activity promptly
            found = await _open_once_all_there(first, 3)
        assert found == [mine.id, theirs.id, spare.id]
    finally:
        await first.close()
        await second.close()
