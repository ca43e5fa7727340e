"""The recovery sweep over a real intake: order per chat, isolation, expiry, off switch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from core.turn.recovery import Recovery, RecoveryOptions
from memory.chats.types import ChatKey
from memory.turns.store import SqlStorage
from memory.turns.types import IntakeDraft, IntakeEntry

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


class Finisher:
    """Answers what it is given, in the order given; chat `broken` always raises."""

    def __init__(self, busy: frozenset[ChatKey] = frozenset()) -> None:
        self.busy = busy
        self.done: list[tuple[str, str]] = []

    def is_busy(self, chat_key: ChatKey) -> bool:
        return chat_key in self.busy

    async def resume_run(self, entries: Sequence[IntakeEntry]) -> int:
        """Answers the first row only (the processor decides what a burst is)."""
        entry = entries[0]
        if entry.chat_id == "broken":
            raise RuntimeError("a bug in one chat")
        self.done.append(("resume", entry.text))
        return 1

    async def redeliver(self, entry: IntakeEntry) -> bool:
        self.done.append(("redeliver", entry.text))
        return True


async def accept(storage: SqlStorage, chat: str, text: str, age_s: float = 5) -> IntakeEntry:
    entry = await storage.intake.accept(
        IntakeDraft(
            "telegram", chat, "private", "7", "Ann", text, f"{chat}-{text}",
            received_at=NOW - timedelta(seconds=age_s),
        )
    )  # fmt: skip
    assert entry is not None
    return entry


async def test_a_failing_chat_does_not_stop_the_others(
    storage: SqlStorage, caplog: pytest.LogCaptureFixture
) -> None:
    await accept(storage, "broken", "x")
    await accept(storage, "a", "a1")
    answered = await accept(storage, "a", "a2")
    await storage.intake.move(answered.id, "answered", expected=["pending"])
    await accept(storage, "busy", "b1")
    finisher = Finisher(busy=frozenset({ChatKey("telegram", "busy")}))
    recovery = Recovery(storage.intake, finisher, RecoveryOptions(), clock=lambda: NOW)
    with caplog.at_level(logging.ERROR, logger="core.turn.recovery"):
        assert await recovery.sweep() == 2
    assert finisher.done == [("resume", "a1"), ("redeliver", "a2")]  # in order, per chat
    assert "telegram:broken failed" in caplog.text
    assert recovery.counters.recovered_total == 2


async def test_too_old_messages_expire_and_zero_turns_recovery_off(storage: SqlStorage) -> None:
    await accept(storage, "a", "old", age_s=901)
    await accept(storage, "a", "new", age_s=10)
    off = Recovery(storage.intake, Finisher(), RecoveryOptions(within_s=0), clock=lambda: NOW)
    assert await off.sweep() == 0 and not off.enabled
    assert (await storage.intake.stats()).pending == 2
    finisher = Finisher()
    recovery = Recovery(storage.intake, finisher, RecoveryOptions(), clock=lambda: NOW)
    assert await recovery.sweep() == 1
    assert finisher.done == [("resume", "new")]
    assert [e.text for e in await storage.intake.listing("expired")] == ["old"]
    health = await recovery.health()
    assert (health["expired_total"], health["recovered_total"]) == (1, 1)
