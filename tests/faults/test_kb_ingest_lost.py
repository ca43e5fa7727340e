"""Ingestion across SIGKILL: a process running "kb_add" jobs (tests/faults/
kb_ingest_child.py) is killed with SIGKILL while it waits on the embeddings, after the
engine accepted the document; another runner takes the job over after its lease.

What must hold (issue 36): the document is searchable whole after the restart, stored
once, and the chat is told once; before that it is not searchable at all (never half).
Runs on SQLite, and on PostgreSQL with CHATTERD_TEST_DATABASE_URL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.jobs.runner import JobRunner
from core.knowledge.ingest import KIND, IngestRequest, JobIntake, Requester, ingest_handler
from core.knowledge.reading import SandboxReader
from core.knowledge.service import KnowledgeBase, Scope
from memory.knowledge.store import KnowledgeStore
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI
from tests.knowledge.kb_support import Chat, knowledge, opened, parse_sandbox, run_all

pytestmark = pytest.mark.faults

GROUP = Scope.chat("telegram", "-100111")
ANN = Requester("telegram", "-100111", "group", "7", "Ann", message_id="55")
RULES = "# Bans\nCheating in the game gets you banned for good.\n\n# Schedule\nTuesdays at 19:00."
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def kb(storage: SqlStorage, fake: FakeOpenAI) -> AsyncIterator[KnowledgeBase]:
    async with knowledge(storage, fake) as base:
        yield base


async def until(check: object, within_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not await check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_sigkill_while_embedding_leaves_the_document_whole_once_after_the_takeover(
    storage: SqlStorage, kb: KnowledgeBase, fake: FakeOpenAI, database_url: str
) -> None:
    line = await JobIntake(storage.jobs).add(IngestRequest(GROUP, "rules.md", ANN, text=RULES))
    assert line.startswith("📚 adding rules.md (job #1)")
    fake.embedding_latency_s = 600.0  # the doomed process waits here until it is killed
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.faults.kb_ingest_child",
        database_url,
        fake.base_url,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        assert await child.stdout.readline() == b"READY\n"

        async def embedding() -> bool:
            return len(fake.embedding_requests) >= 1

        await until(embedding)
        (accepted,) = await kb.list(GROUP)
        assert accepted.state == "indexing" and accepted.chunk_count == 0
        words = await KnowledgeStore(storage.database).keyword([GROUP.key], ["cheating"], 10)
        assert words == []  # never half: no passage is searchable yet
        child.send_signal(signal.SIGKILL)
        assert await child.wait() == -signal.SIGKILL
        rest = await child.stdout.read()
        assert b"SENT" not in rest  # it died before it said anything
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()

    fake.embedding_latency_s = 0.0
    chat = Chat()
    async with parse_sandbox() as box:
        handler = ingest_handler(opened(kb), SandboxReader(box, 1_000_000))
        runner = JobRunner(storage.jobs, {KIND: handler}, chat.send, worker="next", lease_s=2.0)

        async def taken_over() -> bool:
            await run_all(runner)
            return bool(chat.sent)

        await until(taken_over)  # once the dead process's lease ran out

    (doc,) = await kb.list(GROUP)  # once, and the row the dead attempt accepted
    assert doc.id == accepted.id and doc.state == "ready" and doc.chunk_count > 0
    assert chat.texts == [f"📚 added rules.md (#{doc.id}): {doc.chunk_count} passages"]
    job = await storage.jobs.get(1)
    assert job is not None and job.state == "done" and job.attempts == 2
    hits = await kb.search("is cheating allowed", GROUP)
    assert hits and hits[0].document_id == doc.id and "Cheating" in hits[0].text
