"""Background tasks across SIGKILL: the real `chatterd run` process killed in the middle of
a task's tool loop; after the restart the task resumes after its last stored step and its
answer is delivered exactly once.

Counted on the wire: the answers the fake Bot API was sent, and the task's requests to
the fake model (the resumed run's first request already holds the steps done before the
kill: they are not done again).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import content_text
from tests.faults.test_nothing_lost import PEOPLE, Harness
from tests.faults.test_reminders_lost import until

pytestmark = pytest.mark.faults

EXTRA = {
    # The default lease (60 s): a dead process's task must be taken over at once, not then.
    "CHATTERD_TOOLS__SEARCH": "false",
}
TASK_SYSTEM = "working in the background on task"


class Notes:
    """The model: a turn spawns a task; the task writes three notes, one a step (the
    third step's request hangs until `release`), then answers."""

    def __init__(self) -> None:
        self.task_requests: list[int] = []  # steps already done, seen by each request
        self.hold = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> str:
        said = [content_text(m.get("content")) for m in body["messages"]]
        if TASK_SYSTEM not in said[0]:
            if any("spawn_result" in text for text in said):
                return "🔧 working on it."
            return "[Spawn: write three notes about kites]"
        done = sum(1 for m in body["messages"][2:] if m["role"] == "assistant")
        self.task_requests.append(done)
        if done == 2 and len(self.task_requests) == 3:
            await self.hold.wait()  # killed here: two steps are stored
        if done < 3:
            return f"[Remember: kite note {done + 1}]"
        return "Three notes written about kites."


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


async def test_sigkill_during_a_task_resumes_from_its_last_step_and_answers_once(
    harness: Harness,
) -> None:
    ann = PEOPLE[0]
    notes = Notes()
    harness.model.set_default(notes)
    first = await harness.daemon(EXTRA)
    harness.say(ann, "please write three notes about kites")
    await until(lambda: len(notes.task_requests) == 3, [first])
    first.kill()
    await first.wait()
    notes.hold.set()  # the dead process's request ends unanswered
    second = await harness.daemon(EXTRA)
    answers = lambda: [  # noqa: E731
        s["text"] for s in harness.tg.sent if s["text"].startswith("🔧 #")
    ]
    await until(lambda: answers(), [first, second], within_s=15)
    await asyncio.sleep(1.5)  # a second send would have come by now (runner pass: 1 s)
    await second.terminate()
    assert answers() == ["🔧 #1: Three notes written about kites."]
    acks = [s["text"] for s in harness.tg.sent if s["text"] == "🔧 working on it."]
    assert len(acks) == 1
    # Steps 1 and 2 ran once; the resumed run began with both already in its request.
    assert notes.task_requests[:3] == [0, 1, 2]
    assert notes.task_requests[3:] == [2, 3]
