"""The digest's budget: every message of the chat since the mark, the newest that fit the
window less the reply, the oldest left out and said; the mark moves only when posted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from core.digest.recap import Digester, DigestOptions
from core.llm import ChatResult
from core.llm.errors import LLMError
from core.text.tokens import get_counter
from memory.turns.types import Turn
from tests.fakes.manual_clock import ManualWallClock

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
UTC_ZONE: tzinfo = UTC


def turn(n: int, at: datetime, *, kind: str = "context", role: str = "user") -> Turn:
    return Turn(
        id=n,
        platform="telegram",
        chat_id="-1",
        role=role,  # type: ignore[arg-type]
        kind=kind,  # type: ignore[arg-type]
        content=f"[P{n % 4}]: line number {n} with a few more words in it",
        token_count=0,
        sender_id=str(n % 4),
        sender_name=f"P{n % 4}",
        platform_message_id=str(n),
        meta={},
        created_at=at,
    )


class Turns:
    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns

    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]:
        older = [t for t in self.turns if before_id is None or t.id < before_id]
        return older[-limit:]


class Marks:
    def __init__(self) -> None:
        self.at: datetime | None = None

    async def mark(self, platform: str, chat_id: str) -> datetime | None:
        return self.at

    async def set_mark(self, platform: str, chat_id: str, through_at: datetime) -> None:
        self.at = through_at


class Model:
    def __init__(self, fail: bool = False) -> None:
        self.requests: list[list[dict[str, Any]]] = []
        self.fail = fail

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatResult:
        self.requests.append(messages)
        if self.fail:
            raise LLMError("unavailable", "down")
        return ChatResult("recap", "m", "stop", 1, 1)

    async def close(self) -> None:
        return None


def digester(turns: list[Turn], model: Model, marks: Marks, window: int) -> Digester:
    options = DigestOptions(window=window, reply_tokens=200, lookback_h=24, max_messages=1000)
    return Digester(
        Turns(turns),
        marks,
        model,
        get_counter("o200k_base"),  # type: ignore[arg-type]
        options=options,
        clock=ManualWallClock(START),
    )


async def test_the_oldest_are_left_out_when_the_day_does_not_fit() -> None:
    # 500 messages over the last 10 hours (across several read pages), one from two days ago
    old = turn(0, START - timedelta(days=2))
    recent = [turn(n, START - timedelta(minutes=600 - n)) for n in range(1, 501)]
    tool = turn(501, START, kind="tool_result", role="tool")
    model, marks = Model(), Marks()
    recap = await digester([old, *recent, tool], model, marks, window=2000).recap(
        "telegram", "-1", UTC_ZONE
    )
    assert recap.posted and 0 < recap.messages < 500
    assert recap.left_out == 500 - recap.messages
    assert recap.tokens <= recap.budget == 1800
    (request,) = model.requests
    body = request[1]["content"]
    assert "line number 500 " in body and "line number 1 " not in body
    assert "line number 0 " not in body and "tool" not in body  # before the lookback; workings
    assert f"the oldest {recap.left_out} did not fit" in recap.text
    assert marks.at is None  # moved only once it was sent
    await digester([], model, marks, 2000).posted("telegram", "-1", recap)
    assert marks.at == START


async def test_nothing_to_recap_and_a_failing_model_move_nothing() -> None:
    model, marks = Model(fail=True), Marks()
    empty = await digester([], model, marks, 2000).recap("telegram", "-1", UTC_ZONE)
    assert empty.text.startswith("Nothing to recap") and not empty.posted
    assert model.requests == []
    failed = await digester([turn(1, START)], model, marks, 2000).recap("telegram", "-1", UTC_ZONE)
    assert not failed.posted and failed.through is None and "could not be written" in failed.text
