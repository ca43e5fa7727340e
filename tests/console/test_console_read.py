"""What the console reads: chat activity kept by the turn path (0006), keyset pages of
chats and people, the overview's counts, and the context picture's arithmetic.

On SQLite by default, on PostgreSQL with CHATTERD_TEST_DATABASE_URL (storage tests).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from alembic import command
from sqlalchemy import text

from bot.console.charts import Bar, Segment, bar_chart, stacked_bar
from bot.console.picture import picture_of, was_dropped
from core.context import ContextBuilder
from core.text.tokens import get_counter
from memory.console.activity import Activity, first_intake_id_since
from memory.console.browse import Browse, like_pattern
from memory.db.migrate import Database, alembic_config, parse_url
from memory.turns.store import SqlStorage
from memory.turns.types import IntakeDraft, NewTurn
from tests.console.console_support import add_usage

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def turn(chat: str, *, kind: str = "private", role: str = "user", mid: str | None = None,
         sender: str | None = "u1", name: str | None = "Ann", title: str | None = None,
         platform: str = "telegram") -> NewTurn:  # fmt: skip
    return NewTurn(
        platform, chat, kind, role, "message", "hello", 2,  # type: ignore[arg-type]
        sender_id=sender if role == "user" else None,
        sender_name=name if role == "user" else None,
        platform_message_id=mid, chat_title=title,
    )  # fmt: skip


async def test_the_turn_path_keeps_title_turns_and_last_activity(storage: SqlStorage) -> None:
    browse = Browse(storage.database)
    await storage.add_turns([turn("p1", mid="1"), turn("p1", role="assistant")])
    await storage.add_turn(turn("p1", mid="1"))  # a duplicate is not counted
    await storage.add_turn(turn("g1", kind="group", title="Tea party", name="Bob", mid="a"))
    await storage.add_turn(turn("g1", kind="group", name="Carol", mid="b"))  # no title: kept
    private, group = await browse.chat("telegram", "p1"), await browse.chat("telegram", "g1")
    assert private is not None and group is not None
    assert (private.title, private.turns, private.chat_type) == ("Ann", 2, "private")
    assert (group.title, group.turns) == ("Tea party", 2)  # never a group member's name
    assert group.last_active_at >= private.last_active_at
    await storage.add_turn(turn("p1", name="Ann B.", mid="2"))  # the person renamed
    assert await storage.clear_history("telegram", "p1") == 3
    cleared = await browse.chat("telegram", "p1")
    assert cleared is not None and (cleared.title, cleared.turns) == ("Ann B.", 0)
    assert await browse.chat("telegram", "nope") is None


async def test_chat_pages_cover_every_chat_once_busiest_first(storage: SqlStorage) -> None:
    for n in range(57):
        await storage.add_turn(turn(f"c{n:02d}", sender=f"u{n}", name=f"Person {n}"))
    await storage.add_turn(turn("c03", mid="again"))  # c03 is now the most recent
    browse = Browse(storage.database)
    seen: list[str] = []
    after = None
    while True:
        page = await browse.chats(limit=20, after=after)
        seen += [row.chat_id for row in page.rows]
        if page.next is None:
            break
        after = page.next
    assert len(seen) == len(set(seen)) == 57
    assert seen[0] == "c03" and seen[1] == "c56" and seen[-1] == "c00"
    first = await browse.chats(limit=20, after="not a cursor")
    assert first.rows[0].chat_id == "c03"  # a bad cursor is the first page, not an error


async def test_chat_search_matches_title_or_id_and_wildcards_are_literal(
    storage: SqlStorage,
) -> None:
    await storage.add_turn(turn("g%1", kind="group", title="Tea_Party", mid="1"))
    await storage.add_turn(turn("g2", kind="group", title="TeaXParty", mid="2"))
    await storage.add_turn(turn("-100777", kind="group", title="Chess", mid="3"))
    browse = Browse(storage.database)

    async def found(search: str) -> set[str]:
        return {row.chat_id for row in (await browse.chats(search=search)).rows}

    assert await found("tea_party") == {"g%1"}  # case-insensitive, "_" is not a wildcard
    assert await found("%") == {"g%1"}
    assert await found("777") == {"-100777"}
    assert await found("party") == {"g%1", "g2"}
    assert like_pattern("a%b_c\\") == "%a\\%b\\_c\\\\%"


async def test_chat_tokens_come_from_the_usage_table(storage: SqlStorage) -> None:
    await storage.add_turn(turn("g1", kind="group", title="G", mid="1"))
    await storage.add_turn(turn("g2", kind="group", title="H", mid="1"))
    day = date(2026, 11, 20)
    await add_usage(
        storage,
        [
            {"day": day, "platform": "telegram", "chat_id": "g1", "prompt_tokens": 100,
             "completion_tokens": 20},
            {"day": day, "platform": "telegram", "chat_id": "g1", "prompt_tokens": 5,
             "completion_tokens": 1, "purpose": "vision"},
            {"day": day, "platform": "qq", "chat_id": "g1", "prompt_tokens": 999,
             "completion_tokens": 0},
        ],
    )  # fmt: skip
    rows = {r.chat_id: r.tokens for r in (await Browse(storage.database).chats()).rows}
    assert rows == {"g1": 126, "g2": 0}  # the QQ chat of the same id is another chat


async def test_people_pages_with_memory_counts_and_search(storage: SqlStorage) -> None:
    for n in range(7):
        await storage.add_turn(turn(f"p{n}", sender=f"u{n}", name=f"Person {n}"))
    await storage.add_memory("telegram", "u2", "likes tea", "test")
    await storage.add_memory("telegram", "u2", "has a cat", "test")
    browse = Browse(storage.database)
    first = await browse.people(limit=4)
    assert [p.user_id for p in first.rows] == ["u6", "u5", "u4", "u3"]
    second = await browse.people(limit=4, after=first.next)
    assert [(p.user_id, p.memories) for p in second.rows] == [("u2", 2), ("u1", 0), ("u0", 0)]
    assert second.next is None
    assert [p.name for p in (await browse.people(search="person 5")).rows] == ["Person 5"]
    person = await browse.person("telegram", "u2")
    assert person is not None and person.memories == 2


async def _accept(storage: SqlStorage, at: datetime, n: int, state: str) -> None:
    entry = await storage.intake.accept(
        IntakeDraft("telegram", "c1", "private", "u1", "Ann", "hi", f"m{n}", received_at=at)
    )
    assert entry is not None
    if state != "pending":
        await storage.intake.move(entry.id, state, expected=["pending"])  # type: ignore[arg-type]


async def test_turns_per_hour_counts_states_in_their_hour(storage: SqlStorage) -> None:
    now = T0 + timedelta(minutes=30)
    plan = [
        (T0 - timedelta(hours=30), "delivered"),  # before the window
        (T0 - timedelta(hours=22, minutes=50), "delivered"),  # in the first hour shown
        (T0 - timedelta(hours=2, minutes=5), "failed"),
        (T0 - timedelta(hours=2, minutes=1), "delivered"),
        (T0 + timedelta(minutes=1), "answered"),
        (T0 + timedelta(minutes=2), "pending"),
        (T0 + timedelta(minutes=3), "expired"),
    ]
    for n, (at, state) in enumerate(plan):
        await _accept(storage, at, n, state)
    hours = await Activity(storage.database).turns_per_hour(now)
    assert len(hours) == 24 and hours[-1].hour == T0 and hours[0].hour == T0 - timedelta(hours=23)
    counted = {
        h.hour: (h.answered, h.failed, h.open) for h in hours if h.answered + h.failed + h.open
    }
    assert counted == {
        T0 - timedelta(hours=23): (1, 0, 0),
        T0 - timedelta(hours=3): (1, 1, 0),  # 09:55 failed, 09:59 delivered
        T0: (1, 1, 1),  # answered, expired, pending
    }
    failed = await Activity(storage.database).failed_since(T0 - timedelta(hours=3))
    assert [f.state for f in failed] == ["expired", "failed"]


async def test_the_first_row_of_a_window_is_found_by_binary_search(storage: SqlStorage) -> None:
    times = [T0 + timedelta(minutes=7 * n) for n in range(40)]
    for n, at in enumerate(times):
        await _accept(storage, at, n, "delivered")

    async def first(since: datetime) -> int | None:
        return await storage.database.read(lambda conn: first_intake_id_since(conn, since))

    ids = [e.id for e in reversed(await storage.intake.listing(limit=100))]
    assert await first(T0 - timedelta(days=1)) == ids[0]
    assert await first(times[17]) == ids[17]
    assert await first(times[17] + timedelta(seconds=1)) == ids[18]
    assert await first(times[-1]) == ids[-1]
    assert await first(times[-1] + timedelta(seconds=1)) is None


async def test_tokens_per_day_fills_days_without_usage_with_zero(storage: SqlStorage) -> None:
    today = date(2026, 11, 24)
    await add_usage(
        storage,
        [
            {"day": today, "platform": "qq", "chat_id": "a", "prompt_tokens": 10,
             "completion_tokens": 3},
            {"day": today, "platform": "telegram", "chat_id": "b", "prompt_tokens": 5,
             "completion_tokens": 1},
            {"day": today - timedelta(days=3), "platform": "qq", "chat_id": "a",
             "prompt_tokens": 7, "completion_tokens": 0},
            {"day": today - timedelta(days=40), "platform": "qq", "chat_id": "a",
             "prompt_tokens": 1000, "completion_tokens": 0},
        ],
    )  # fmt: skip
    days = await Activity(storage.database).tokens_per_day(today, days=5)
    assert [(d.day.day, d.prompt, d.completion) for d in days] == [
        (20, 0, 0), (21, 7, 0), (22, 0, 0), (23, 0, 0), (24, 15, 4)
    ]  # fmt: skip


def test_migration_0006_fills_activity_in_from_existing_turns(database_url: str) -> None:
    config = alembic_config()
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    command.upgrade(config, "0005")
    rows = """
    INSERT INTO users (id, platform, platform_user_id, display_name, created_at)
      VALUES (1, 'qq', '42', 'Dora', '2026-11-01 10:00:00');
    INSERT INTO chats (id, platform, platform_chat_id, chat_type, created_at)
      VALUES (1, 'qq', 'private:42', 'private', '2026-11-01 10:00:00'),
             (2, 'qq', 'group:7', 'group', '2026-11-02 10:00:00');
    INSERT INTO turns (id, chat_id, sender_user_id, role, kind, content, token_count,
                       meta, created_at)
      VALUES (1, 1, 1, 'user', 'message', 'hi', 1, '{}', '2026-11-03 09:00:00'),
             (2, 1, NULL, 'assistant', 'message', 'hello', 1, '{}', '2026-11-03 09:00:05')
    """

    async def seed_then_read() -> list[tuple[str, str | None, int, datetime]]:
        database = Database(parse_url(database_url), pool_size=1)
        try:
            for statement in rows.split(";"):
                await database.write(lambda conn, s=statement: conn.execute(text(s)))
            await asyncio.to_thread(command.upgrade, config, "head")
            page = await Browse(database).chats()
            return [(r.chat_id, r.title, r.turns, r.last_active_at) for r in page.rows]
        finally:
            await database.close()

    found = asyncio.run(seed_then_read())
    assert [(chat, title, turns) for chat, title, turns, _ in found] == [
        ("private:42", "Dora", 2),  # its last turn, 3 November
        ("group:7", None, 0),  # never spoke: its creation, 2 November
    ]
    assert found[0][3] == datetime(2026, 11, 3, 9, 0, 5, tzinfo=UTC)
    assert found[1][3] == datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def test_the_context_picture_adds_up_to_the_report(tmp_path: Path) -> None:
    counter = get_counter("o200k_base")
    builder = ContextBuilder(tmp_path / "ws", max_tokens=900, token_counter=counter,
                             reply_tokens=100)  # fmt: skip
    history = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n} " + "word " * 80}
        for n in range(12)
    ]
    report = builder.build(history, "and now?").report
    picture = picture_of(report)
    inside = [s for s in picture.segments if s.key not in ("reserve", "free")]
    assert sum(s.tokens for s in inside) == picture.in_context == report.total_tokens
    assert sum(s.tokens for s in picture.segments) == report.window
    assert report.history_dropped > 0 and picture.dropped
    first_dropped, last_dropped = report.dropped_ranges[0]
    assert isinstance(first_dropped, int)
    assert was_dropped(first_dropped, report) and not was_dropped(10_000, report)
    assert was_dropped(1, None) is False


def test_charts_escape_every_label() -> None:
    svg = bar_chart([Bar("<b>", (1, 2), '"><script>x</script>')], ("ok", "bad"), title="<t>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "&lt;b&gt;" in svg
    bar = stacked_bar([Segment("history", "<img src=x>", 5)], title="t")
    assert "<img" not in bar and 'data-tokens="5"' in bar
