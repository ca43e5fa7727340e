"""UsageStore on the real database (SQLite, or PostgreSQL with CHATTERD_TEST_DATABASE_URL)."""

from __future__ import annotations

import asyncio
from datetime import date, timedelta

import pytest

from memory.turns.store import SqlStorage
from memory.usage.types import DaySpend, UsageDelta, UsageScope, UsageTotals

DAY = date(2026, 3, 14)


def delta(
    user: str = "1",
    chat: str = "1",
    *,
    day: date = DAY,
    platform: str = "telegram",
    model: str = "m",
    purpose: str = "reply",
    prompt: int = 10,
    completion: int = 5,
    estimated: int = 0,
) -> UsageDelta:
    return UsageDelta(day, platform, chat, user, model, purpose, prompt, completion, 1, estimated)


async def test_adds_to_the_days_row_instead_of_inserting_rows(storage: SqlStorage) -> None:
    await storage.usage.add([delta(), delta(prompt=1, completion=2, estimated=1)])
    await storage.usage.add([delta(prompt=100, completion=0)])
    mine = UsageScope("telegram", user_id="1")
    assert await storage.usage.totals(DAY, DAY, mine) == UsageTotals(111, 7, 3, 1)
    (row,) = await storage.usage.grouped("model", DAY, DAY)
    assert row.key == "m" and row.totals.calls == 3


async def test_concurrent_writers_lose_no_increment(storage: SqlStorage) -> None:
    """Replicas add to the same row at once: the upsert is atomic on both backends."""
    await asyncio.gather(*(storage.usage.add([delta(prompt=1, completion=1)]) for _ in range(40)))
    assert await storage.usage.totals(DAY, DAY) == UsageTotals(40, 40, 40, 0)


async def test_scopes_and_day_ranges(storage: SqlStorage) -> None:
    await storage.usage.add(
        [
            delta("alice", "group", prompt=100, completion=0),
            delta("bob", "group", prompt=10, completion=0),
            delta("alice", "alice", prompt=1, completion=0, day=DAY - timedelta(days=1)),
            delta("alice", "x", platform="qq", prompt=1000, completion=0),
        ]
    )
    usage = storage.usage
    assert (await usage.totals(DAY, DAY, UsageScope("telegram", user_id="alice"))).tokens == 100
    two_days = UsageScope("telegram", user_id="alice")
    assert (await usage.totals(DAY - timedelta(days=1), DAY, two_days)).tokens == 101
    assert (await usage.totals(DAY, DAY, UsageScope("telegram", chat_id="group"))).tokens == 110
    assert (await usage.totals(DAY, DAY, UsageScope("qq"))).tokens == 1000
    assert (await usage.totals(DAY, DAY)).tokens == 1110
    with pytest.raises(ValueError, match="platform"):
        await usage.totals(DAY, DAY, UsageScope(user_id="alice"))


async def test_grouped_listings_most_tokens_first_and_days_in_order(storage: SqlStorage) -> None:
    await storage.usage.add(
        [
            delta("a", "g", prompt=5, model="small"),
            delta("b", "g", prompt=50, model="big", purpose="vision"),
            delta("b", "b", prompt=500, model="big", day=DAY - timedelta(days=2)),
        ]
    )
    since = DAY - timedelta(days=7)
    users = await storage.usage.grouped("user", since, DAY)
    assert [(g.key, g.totals.tokens) for g in users] == [("telegram:b", 560), ("telegram:a", 10)]
    chats = await storage.usage.grouped("chat", since, DAY, limit=1)
    assert [g.key for g in chats] == ["telegram:b"]
    models = await storage.usage.grouped("model", since, DAY)
    assert [g.key for g in models] == ["big", "small"]
    days = await storage.usage.grouped("day", since, DAY)
    assert [g.key for g in days] == [(DAY - timedelta(days=2)).isoformat(), DAY.isoformat()]
    series = await storage.usage.series(DAY, 3, UsageScope("telegram", user_id="b"))
    assert [(day, totals.tokens) for day, totals in series] == [
        (DAY - timedelta(days=2), 505),
        (DAY - timedelta(days=1), 0),
        (DAY, 55),
    ]


async def test_spent_on_one_day_for_user_chat_and_everyone(storage: SqlStorage) -> None:
    await storage.usage.add(
        [
            delta("alice", "group", prompt=100, completion=1),
            delta("bob", "group", prompt=10, completion=0),
            delta("alice", "alice", prompt=7, completion=0),
            delta("carol", "elsewhere", prompt=1000, completion=0),
            delta("alice", "group", prompt=9999, completion=0, day=DAY - timedelta(days=1)),
        ]
    )
    spent = await storage.usage.spent_on(DAY, "telegram", "group", "alice")
    assert spent == DaySpend(user=108, chat=111, everyone=1118)
    narrow = await storage.usage.spent_on(DAY, "telegram", "group", "alice", everyone=False)
    assert narrow == DaySpend(user=108, chat=111, everyone=0)
    assert await storage.usage.spent_on(DAY + timedelta(days=1), "telegram", "g", "a") == DaySpend()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (delta(purpose="chit-chat"), "purpose"),
        (delta(user=""), "id"),
        (delta(prompt=-1), "prompt_tokens"),
        (delta(model=""), "model"),
    ],
)
async def test_malformed_deltas_are_refused_before_any_write(
    storage: SqlStorage, bad: UsageDelta, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await storage.usage.add([delta(), bad])
    assert await storage.usage.totals(DAY, DAY) == UsageTotals()


async def test_long_model_names_are_cut_to_fit(storage: SqlStorage) -> None:
    await storage.usage.add([delta(model="m" * 400)])
    (row,) = await storage.usage.grouped("model", DAY, DAY)
    assert row.key == "m" * 256
