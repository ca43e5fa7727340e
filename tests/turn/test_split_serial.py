"""Reply splitting and per-chat ordering primitives."""

from __future__ import annotations

import asyncio

import pytest

from channels.formatting.split import split_text
from core.tasks import TaskTracker
from core.turn.ordering import ChatSerializer, ChatTicket
from memory.chats.types import ChatKey

CHAT_A = ChatKey("telegram", "a")


def test_short_text_is_one_piece() -> None:
    assert split_text("hello", 10) == ["hello"]


def test_split_prefers_paragraphs_then_sentences() -> None:
    text = "First paragraph here.\n\nSecond one is here. It has two sentences."
    assert split_text(text, 30) == [
        "First paragraph here.",
        "Second one is here.",
        "It has two sentences.",
    ]


def test_split_cjk_sentences_and_hard_cut() -> None:
    text = "这是第一句。" * 10
    pieces = split_text(text, 20)
    assert all(len(p) <= 20 for p in pieces) and "".join(pieces) == text
    assert all(p.endswith("。") for p in pieces)
    run = "x" * 95
    assert split_text(run, 40) == ["x" * 40, "x" * 40, "x" * 15]


@pytest.mark.parametrize("limit", [9, 50, 4096])
def test_split_never_exceeds_limit_and_keeps_words(limit: int) -> None:
    text = " ".join(f"word{i}." for i in range(2000))
    pieces = split_text(text, limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert " ".join(pieces).split() == text.split()


async def test_turns_in_one_chat_run_in_arrival_order() -> None:
    serial = ChatSerializer(max_in_flight=8)
    order: list[int] = []
    gate = asyncio.Event()

    async def turn(i: int) -> None:
        async with serial.turn(CHAT_A):
            if i == 0:
                await gate.wait()
            order.append(i)

    tasks = [asyncio.create_task(turn(i)) for i in range(5)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert serial.active_chats == 0  # idle chats leave nothing behind


async def test_a_reserved_place_keeps_its_order_whoever_waits_first() -> None:
    """Places are taken at arrival; the intake write that follows may finish in any order."""
    serial = ChatSerializer(max_in_flight=8)
    first, second, third = (serial.reserve(CHAT_A) for _ in range(3))
    order: list[str] = []

    async def take(name: str, place: ChatTicket) -> None:
        async with place:
            order.append(name)

    later = asyncio.create_task(take("second", second))  # starts waiting before "first"
    await asyncio.sleep(0)
    assert order == [] and serial.busy(CHAT_A)
    third.release()  # a duplicate gives its place up without waiting
    await take("first", first)
    await later
    assert order == ["first", "second"]
    assert not serial.busy(CHAT_A)


async def test_a_cancelled_wait_gives_its_place_to_the_next() -> None:
    serial = ChatSerializer(max_in_flight=8)
    holder, cancelled, last = (serial.reserve(CHAT_A) for _ in range(3))
    await holder.__aenter__()
    waiting = asyncio.create_task(cancelled.__aenter__())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await holder.__aexit__(None, None, None)
    async with last:
        pass
    assert not serial.busy(CHAT_A)


async def test_other_chats_do_not_wait_and_global_bound_holds() -> None:
    serial = ChatSerializer(max_in_flight=2)
    running = 0
    peak = 0
    blocked = asyncio.Event()

    async def turn(chat: ChatKey) -> None:
        nonlocal running, peak
        async with serial.turn(chat):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0)
            running -= 1

    async def slow() -> None:
        async with serial.turn(ChatKey("telegram", "slow")):
            await blocked.wait()

    slow_task = asyncio.create_task(slow())
    await asyncio.sleep(0)
    chats = [ChatKey("telegram", f"c{i}") for i in range(10)]
    await asyncio.wait_for(asyncio.gather(*(turn(chat) for chat in chats)), 2)
    assert peak <= 1  # one slot is held by the slow chat; others still progress
    blocked.set()
    await slow_task


async def test_tracker_drains_then_cancels() -> None:
    tracker = TaskTracker()
    finished: list[str] = []

    async def work(name: str, delay: float) -> None:
        async with tracker.track():
            await asyncio.sleep(delay)
            finished.append(name)

    quick = asyncio.create_task(work("quick", 0))
    stuck = asyncio.create_task(work("stuck", 60))
    await asyncio.sleep(0)
    cancelled = await tracker.drain(0.2)
    assert finished == ["quick"] and cancelled == 1
    assert stuck.cancelled() and quick.done()


async def test_spawned_tasks_are_kept_logged_and_drained(caplog) -> None:
    tracker = TaskTracker("test")
    done: list[str] = []

    async def ok() -> None:
        await asyncio.sleep(0)
        done.append("ok")

    async def broken() -> None:
        raise RuntimeError("lost reply")

    tracker.spawn(ok(), name="fine")
    tracker.spawn(broken(), name="failing")
    assert len(tracker) == 2  # strong references: nothing is garbage collected mid-flight
    assert await tracker.drain(2.0) == 0
    assert done == ["ok"] and len(tracker) == 0
    (record,) = [r for r in caplog.records if r.name == "core.tasks"]
    assert record.levelname == "ERROR" and "test task failing failed" in record.getMessage()
    assert record.exc_info is not None and "lost reply" in str(record.exc_info[1])


async def test_cancel_stops_spawned_and_tracked_work_at_once() -> None:
    tracker = TaskTracker()
    forever = asyncio.Event()

    async def tracked() -> None:
        async with tracker.track():
            await forever.wait()

    outside = asyncio.create_task(tracked())
    tracker.spawn(forever.wait())
    await asyncio.sleep(0)
    assert len(tracker) == 2
    assert await tracker.cancel() == 2
    assert outside.cancelled() and len(tracker) == 0
    assert await tracker.drain(0.1) == 0  # idle again: nothing left to wait for
