"""Quotas, the meter, /usage and `chatterd usage` over the real usage table.

SQLite by default, PostgreSQL with CHATTERD_TEST_DATABASE_URL. The wall clock is
injected, so notices an hour apart and a new UTC day need no sleeping.
"""

from __future__ import annotations

import csv
import io
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.commands.usage import UsageCommand
from core.admins import Admins
from core.llm import OpenAIProvider
from core.llm.provider import ChatResult
from core.messages import ChatType, InboundMessage
from core.text.tokens import count_messages, get_counter
from core.tools.builtin import default_registry
from core.tools.loop import ToolLoop
from core.tools.registry import ToolContext
from core.usage.meter import ModelCall, UsageRecorder, UsageSubject, call_cost
from core.usage.quota import QuotaGuard, QuotaLimits, next_reset, quota_notice
from memory.turns.store import SqlStorage
from memory.usage.types import UsageDelta, UsageScope, UsageTotals
from tests.bot.test_cli_e2e import run_cli
from tests.fakes.manual_clock import ManualWallClock
from tests.fakes.openai_server import FakeOpenAI

NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
TODAY = NOON.date()


def message(sender: str = "1", chat: str = "1", *, group: bool = False) -> InboundMessage:
    kind = ChatType.GROUP if group else ChatType.PRIVATE
    return InboundMessage("telegram", chat, kind, sender, f"user {sender}", "hello")


async def spend(
    storage: SqlStorage, tokens: int, sender: str = "1", chat: str = "1", *, day=TODAY
) -> None:
    delta = UsageDelta(day, "telegram", chat, sender, "m", "reply", tokens, 0)
    await storage.usage.add([delta])


# -- quotas ----------------------------------------------------------------------------------


async def test_each_limit_names_whose_allowance_is_used_up(storage: SqlStorage) -> None:
    limits = QuotaLimits(user_tokens_per_day=100, group_tokens_per_day=300)
    guard = QuotaGuard(limits, storage.usage, clock=ManualWallClock(NOON))
    await spend(storage, 99, sender="ann", chat="g")
    assert (await guard.check(message("ann", "g", group=True))).allowed
    await spend(storage, 1, sender="ann", chat="ann")  # her private chat counts too
    over = await guard.check(message("ann", "g", group=True))
    assert (over.allowed, over.over) == (False, "user")
    await spend(storage, 201, sender="bob", chat="g")  # the group: 99 + 201
    assert (await guard.check(message("cat", "g", group=True))).over == "group"
    assert (await guard.check(message("cat", "cat"))).allowed  # the group limit is the group's
    everyone = QuotaGuard(
        QuotaLimits(global_tokens_per_day=400), storage.usage, clock=ManualWallClock(NOON)
    )
    assert (await everyone.check(message("dan", "dan"))).allowed
    await spend(storage, 100, sender="eve", chat="eve")
    refused = await everyone.check(message("dan", "dan"))
    assert refused.over == "global"
    assert (
        refused.notice
        == "I have used my daily token budget; it resets at 00:00 UTC (in 12 h 0 min)."
    )


async def test_one_notice_per_hour_per_chat_and_again_on_a_new_day(storage: SqlStorage) -> None:
    clock = ManualWallClock(NOON.replace(hour=23, minute=10))
    guard = QuotaGuard(QuotaLimits(user_tokens_per_day=10), storage.usage, clock=clock)
    await spend(storage, 10)
    await spend(storage, 10, day=TODAY + timedelta(days=1))  # the next day is used up too
    first = await guard.check(message())
    assert first.notice is not None and "(in 50 min)" in first.notice
    assert (await guard.check(message())).notice is None  # same hour: silence
    assert (await guard.check(message(chat="g", group=True))).notice is not None  # other chat
    clock.now = clock.now.replace(minute=59)
    assert (await guard.check(message())).notice is None
    clock.now += timedelta(minutes=2)  # 00:01: a new day, its own first notice at once
    again = await guard.check(message())
    assert again.notice is not None and "(in 23 h 59 min)" in again.notice


async def test_no_limits_never_reads_the_counters(storage: SqlStorage) -> None:
    await storage.close()  # any read would fail now
    guard = QuotaGuard(QuotaLimits(), storage.usage)
    assert (await guard.check(message())).allowed


def test_the_notice_says_when_midnight_utc_comes() -> None:
    late = datetime(2026, 3, 14, 23, 59, 30, tzinfo=UTC)
    assert next_reset(late) == datetime(2026, 3, 15, tzinfo=UTC)
    assert quota_notice("user", late).endswith("(in 1 min).")
    assert quota_notice("group", NOON).startswith("This group has used its daily token allowance")


# -- the meter ---------------------------------------------------------------------------


def test_without_api_usage_the_request_and_answer_are_counted_by_us() -> None:
    counter = get_counter("o200k_base")
    asked = [{"role": "user", "content": "find the weather in Lisbon"}]
    calls = [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]
    result = ChatResult("", "m", "tool_calls", None, None, tool_calls=calls)
    cost = call_cost(ModelCall(result, asked), counter)
    assert cost.estimated and cost.prompt_tokens == count_messages(asked, counter)
    assert cost.completion_tokens > 0  # the tool call is what the model wrote
    reported = call_cost(ModelCall(ChatResult("hi", "m", "stop", 7, 2), asked), counter)
    assert (reported.prompt_tokens, reported.completion_tokens, reported.estimated) == (7, 2, False)


async def test_a_refused_write_is_logged_and_never_raised(
    storage: SqlStorage, caplog: pytest.LogCaptureFixture
) -> None:
    meter = UsageRecorder(storage.usage, get_counter("o200k_base"), clock=ManualWallClock(NOON))
    who = UsageSubject("telegram", "1", "x" * 200)  # longer than an id may be
    result = ChatResult("hi", "m", "stop", 3, 1)
    await meter.record(who, [ModelCall(result, [])], "reply")
    assert "usage of 1 reply call(s) in telegram:1 not recorded: ValueError" in caplog.text
    await meter.record(UsageSubject("telegram", "1", "1"), [ModelCall(result, [])], "reply")
    assert await storage.usage.totals(TODAY, TODAY) == UsageTotals(3, 1, 1, 0)


# -- /usage --------------------------------------------------------------------------------


async def test_usage_shows_the_allowance_and_flags_our_own_counts(storage: SqlStorage) -> None:
    await storage.usage.add(
        [
            UsageDelta(TODAY, "telegram", "1", "1", "m", "reply", 100, 20, 2, 1),
            UsageDelta(TODAY.replace(day=1), "telegram", "1", "1", "m", "reply", 5, 5, 1, 0),
            UsageDelta(TODAY - timedelta(days=40), "telegram", "1", "1", "m", "reply", 9, 9),
        ]
    )
    command = UsageCommand(
        storage.usage,
        admins=Admins(),
        limits=QuotaLimits(user_tokens_per_day=100),
        clock=ManualWallClock(NOON),
    )
    reply = await command(message(), [])
    ours = "(1 counted by me: the endpoint did not say)"
    assert reply.text.splitlines() == [
        f"Your tokens today: 120 tokens in 2 model calls {ours}",
        f"This month: 130 tokens in 3 model calls {ours}",
        "Your daily allowance: 120 of 100 tokens used today (resets at 00:00 UTC)",
    ]
    assert (await command(message(), ["what"])).text.startswith("Usage: /usage")


# -- chatterd usage --------------------------------------------------------------------------


def cli_env(database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATTERD_", "OPENAI_"))}
    env.update(
        CHATTERD_STORAGE__URL=database_url,
        CHATTERD_CONFIG=str(tmp_path / "absent.toml"),
        CHATTERD_BOT__WORKSPACE=str(tmp_path / "workspace"),
    )
    return env


async def test_cli_lists_by_user_and_model_and_writes_csv(
    storage: SqlStorage, database_url: str, tmp_path: Path
) -> None:
    today = datetime.now(UTC).date()  # the CLI counts up to the real today
    await storage.usage.add(
        [
            UsageDelta(today, "telegram", "g", "1001", "gpt-x", "reply", 1000, 200, 3, 0),
            UsageDelta(today, "qq", "private:7", "7", "gpt-x", "vision", 50, 5, 1, 1),
            UsageDelta(today, "telegram", "g", "1001", "mini", "compaction", 300, 30, 1, 0),
        ]
    )
    env = cli_env(database_url, tmp_path)
    since = (today - timedelta(days=3)).isoformat()
    code, out, err = await run_cli(["usage", "--since", since, "--by", "user"], env)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"tokens from {since} to {today} (UTC), by user:"
    assert lines[1].split() == [
        "user",
        "prompt",
        "completion",
        "tokens",
        "calls",
        "estimated",
        "cached",
        "hit",
        "rate",
    ]
    assert lines[2].split() == ["telegram:1001", "1,300", "230", "1,530", "4", "0", "0", "0%"]
    assert lines[3].split() == ["qq:7", "50", "5", "55", "1", "1", "0", "0%"]
    assert lines[4].split() == ["total", "1,350", "235", "1,585", "5", "1", "0", "0%"]

    code, out, err = await run_cli(["usage", "--since", since, "--by", "model", "--csv"], env)
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows == [
        [
            "model",
            "prompt_tokens",
            "completion_tokens",
            "tokens",
            "calls",
            "estimated_calls",
            "cached_tokens",
        ],
        ["gpt-x", "1050", "205", "1255", "4", "1", "0"],
        ["mini", "300", "30", "330", "1", "0", "0"],
    ]
    code, out, _ = await run_cli(["usage", "--by", "purpose", "--csv", "--since", since], env)
    assert [row[0] for row in csv.reader(io.StringIO(out))] == [
        "purpose",
        "reply",
        "compaction",
        "vision",
    ]


async def test_cli_with_nothing_recorded_and_bad_dates(
    storage: SqlStorage, database_url: str, tmp_path: Path
) -> None:
    env = cli_env(database_url, tmp_path)
    code, out, err = await run_cli(["usage"], env)
    assert code == 0, err
    assert out.startswith("no model calls recorded from ") and out.strip().endswith("(UTC)")
    code, _, err = await run_cli(["usage", "--since", "yesterday"], env)
    assert code == 2 and "is not a date like" in err
    code, _, err = await run_cli(["usage", "--since", "2999-01-01"], env)
    assert code == 2 and "is after today" in err


# -- streamed turns ---------------------------------------------------------------------


@pytest.mark.parametrize("reports", [True, False], ids=["stream-usage", "no-usage"])
async def test_a_streamed_turn_counts_each_round_from_the_streams_usage(
    storage: SqlStorage, reports: bool
) -> None:
    """A previewed turn streams every call; the stream's usage chunk is what is counted,
    or our own count when the server sends none."""
    counter = get_counter("o200k_base")
    meter = UsageRecorder(storage.usage, counter, clock=ManualWallClock(NOON))
    shown: list[str] = []

    async def preview(text: str) -> None:
        shown.append(text)

    async with FakeOpenAI(model="stream-model", send_usage=reports) as fake:
        fake.reply("[Remember: likes tea]", usage=(60, 5))
        fake.reply("Noted, tea it is.", usage=(70, 3))
        llm = OpenAIProvider(fake.base_url, "sk-test", "stream-model", max_retries=0)
        loop = ToolLoop(default_registry(None), llm, meter=meter)
        asked = [{"role": "user", "content": "I like tea"}]
        try:
            result = await loop.run(asked, ToolContext.for_message(message(), storage), preview)
        finally:
            await llm.close()
    assert result.reply == "Noted, tea it is." and shown
    assert [request["stream"] for request in fake.requests] == [True, True]
    totals = await storage.usage.totals(TODAY, TODAY, UsageScope("telegram", user_id="1"))
    if reports:
        assert totals == UsageTotals(130, 8, 2, 0)
    else:
        first, second = (r["messages"] for r in fake.requests)
        prompt = count_messages(first, counter) + count_messages(second, counter)
        completion = counter.count("[Remember: likes tea]") + counter.count("Noted, tea it is.")
        assert totals == UsageTotals(prompt, completion, 2, 2)
