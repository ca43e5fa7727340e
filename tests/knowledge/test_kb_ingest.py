"""Adding documents as durable "kb_add" jobs (core/knowledge/ingest.py) on the real job
store and knowledge tables (SQLite, or PostgreSQL with CHATTERD_TEST_DATABASE_URL), with
embeddings from the fake OpenAI server.

What must hold: the chat is told at once and again when the document is searchable; a
duplicate and a refusal are one line each; an attempt that died after the engine accepted
the document is finished by the next attempt, never stored twice; a folder file's job
replaces its earlier version and removes its documents when the file is gone; a job no
chat asked for sends nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from core.jobs.runner import JobRunner
from core.knowledge.ingest import KIND, IngestRequest, JobIntake, Requester, ingest_handler
from core.knowledge.reading import SandboxReader
from core.knowledge.service import KnowledgeBase, Scope
from core.media.documents import Page
from core.media.sandbox import ParseSandbox
from memory.knowledge.store import KnowledgeStore
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI
from tests.knowledge.kb_support import Chat, knowledge, opened, parse_sandbox, run_all, settings

GROUP = Scope.chat("telegram", "-100111")
ANN = Requester("telegram", "-100111", "group", "7", "Ann", message_id="55")
RULES = "# Bans\nCheating in the game gets you banned for good.\n\n# Schedule\nTuesdays at 19:00."
LEASE_S = 0.3


@pytest.fixture
async def kb(storage: SqlStorage, fake: FakeOpenAI) -> AsyncIterator[KnowledgeBase]:
    async with knowledge(storage, fake) as base:
        yield base


@pytest.fixture
async def sandbox() -> AsyncIterator[ParseSandbox]:
    async with parse_sandbox() as box:
        yield box


def make_runner(
    storage: SqlStorage, kb: KnowledgeBase, chat: Chat, sandbox: ParseSandbox, folder: Path | None
) -> JobRunner:
    handler = ingest_handler(opened(kb), SandboxReader(sandbox, max_chars=1_000_000), folder)
    return JobRunner(storage.jobs, {KIND: handler}, chat.send, worker="w1", lease_s=LEASE_S)


async def test_a_chats_add_answers_at_once_then_once_more_when_searchable(
    storage: SqlStorage, kb: KnowledgeBase, sandbox: ParseSandbox
) -> None:
    chat = Chat()
    intake = JobIntake(storage.jobs)
    line = await intake.add(IngestRequest(GROUP, "rules.md", ANN, text=RULES))
    assert line == "📚 adding rules.md (job #1); I will say when it is searchable."
    assert await kb.search("cheating banned", GROUP) == []  # not yet: the job has not run

    await run_all(make_runner(storage, kb, chat, sandbox, None))

    (docs,) = [await kb.list(GROUP)]
    (doc,) = docs
    assert chat.texts == [f"📚 added rules.md (#{doc.id}): {doc.chunk_count} passages"]
    assert chat.sent[0].reply_to_message_id == "55" and chat.sent[0].chat_id == "-100111"
    hits = await kb.search("is cheating allowed", GROUP)
    assert hits and hits[0].source == "rules.md"


async def test_a_duplicate_and_a_refusal_are_one_line_each(
    storage: SqlStorage, kb: KnowledgeBase, sandbox: ParseSandbox
) -> None:
    chat = Chat()
    intake = JobIntake(storage.jobs)
    runner = make_runner(storage, kb, chat, sandbox, None)
    await intake.add(IngestRequest(GROUP, "rules.md", ANN, text=RULES))
    await run_all(runner)
    await intake.add(IngestRequest(GROUP, "copy.md", ANN, text=RULES))
    pages = (Page("x" * 900), Page("y" * 900))
    await intake.add(IngestRequest(GROUP, "big.pdf", ANN, pages=pages))
    small = KnowledgeBase(
        KnowledgeStore(storage.database), kb.embedder, settings(max_bytes=1024, max_documents=5)
    )
    strict = JobRunner(
        storage.jobs,
        {KIND: ingest_handler(opened(small), SandboxReader(sandbox, 10_000))},
        chat.send,
        worker="w2",
        lease_s=LEASE_S,
    )
    await run_all(strict)

    (doc,) = await kb.list(GROUP)
    said = {m.occurrence_id: m.text for m in chat.sent}
    assert said["job:2"] == f"📚 copy.md is already in the knowledge base as #{doc.id}"
    assert said["job:3"].startswith("📚 big.pdf not added: the document's text is 1801 bytes")
    assert "[knowledge] max_bytes (1024)" in said["job:3"]
    assert [j.state for j in await storage.jobs.recent()] == ["failed", "done", "done"]


async def test_a_retried_job_finishes_the_document_its_dead_attempt_accepted(
    storage: SqlStorage, kb: KnowledgeBase, sandbox: ParseSandbox
) -> None:
    """The dead attempt got as far as the engine's first transaction (the document is
    `indexing` with its pages); its lease runs out; the next attempt finishes that row."""
    chat = Chat()
    intake = JobIntake(storage.jobs)
    await intake.add(IngestRequest(GROUP, "rules.md", ANN, text=RULES))
    blocked = asyncio.Event()

    class Stuck:
        """An embedder that never answers: the attempt is stopped mid-ingestion."""

        model_id = "embed-a"

        async def embed_passages(self, texts: Any) -> Any:
            blocked.set()
            await asyncio.Event().wait()

    dying = KnowledgeBase(KnowledgeStore(storage.database), Stuck(), settings())  # type: ignore[arg-type]
    dead = JobRunner(
        storage.jobs,
        {KIND: ingest_handler(opened(dying), SandboxReader(sandbox, 10_000))},
        chat.send,
        worker="dead",
        lease_s=LEASE_S,
    )
    await dead.tick()
    await blocked.wait()
    (accepted,) = await kb.list(GROUP)
    assert accepted.state == "indexing"
    assert await kb.search("cheating banned", GROUP) == []  # never half: nothing yet
    for task in asyncio.all_tasks():  # the attempt "dies": no release, no renewal
        if getattr(task.get_coro(), "__name__", "") == "ingest":
            task.cancel()
    await asyncio.sleep(LEASE_S * 2)

    await run_all(make_runner(storage, kb, chat, sandbox, None))

    (doc,) = await kb.list(GROUP)
    assert doc.id == accepted.id and doc.state == "ready" and doc.chunk_count > 0
    assert chat.texts == [f"📚 added rules.md (#{doc.id}): {doc.chunk_count} passages"]
    job = await storage.jobs.get(1)
    assert job is not None and job.state == "done" and job.attempts == 2
    hits = await kb.search("is cheating allowed", GROUP)
    assert hits and hits[0].document_id == doc.id


async def test_a_folder_file_is_added_replaced_when_changed_and_removed_when_gone(
    storage: SqlStorage, kb: KnowledgeBase, sandbox: ParseSandbox, tmp_path: Path
) -> None:
    chat = Chat()
    intake = JobIntake(storage.jobs)
    runner = make_runner(storage, kb, chat, sandbox, tmp_path)
    (tmp_path / "telegram:-100111").mkdir()
    path = tmp_path / "telegram:-100111" / "rules.md"
    folder = Requester.nobody("folder", "folder")
    request = IngestRequest(
        GROUP, "rules.md", folder, file="telegram:-100111/rules.md", added_by="folder:x"
    )

    path.write_text(RULES)
    await intake.add(request)
    await run_all(runner)
    (first,) = await kb.list(GROUP)
    assert first.added_by == "folder:x" and first.state == "ready"

    path.write_text(RULES.replace("Tuesdays", "Fridays"))
    await intake.add(request)
    await run_all(runner)
    (second,) = await kb.list(GROUP)
    assert second.id != first.id
    assert "Fridays" in (await kb.search("schedule fridays", GROUP))[0].text

    path.unlink()
    await intake.add(request)
    await run_all(runner)
    assert await kb.list(GROUP) == []
    assert chat.sent == []  # a job no chat asked for tells nobody
    jobs = await storage.jobs.recent()
    assert [j.outcome for j in jobs][0] == "📚 removed rules.md: its file is gone"
    assert all(j.delivered_at is not None for j in jobs)


async def test_a_file_job_cannot_read_outside_the_folder(
    storage: SqlStorage, kb: KnowledgeBase, sandbox: ParseSandbox, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("the admin password is hunter2")
    inside = tmp_path / "knowledge"
    inside.mkdir()
    intake = JobIntake(storage.jobs)
    folder = Requester.nobody("folder", "folder")
    await intake.add(IngestRequest(GROUP, "s.txt", folder, file="../secret.txt"))
    await run_all(make_runner(storage, kb, Chat(), sandbox, inside))
    (job,) = await storage.jobs.recent()
    assert job.state == "failed"
    assert job.outcome == "📚 s.txt not added: the file is outside the knowledge folder"
    assert await kb.list(GROUP) == []
