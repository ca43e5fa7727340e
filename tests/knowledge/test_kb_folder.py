"""The knowledge folder (core/knowledge/folder.py) over tmp folders, the real job store
and knowledge tables (SQLite, or PostgreSQL with CHATTERD_TEST_DATABASE_URL), the parse
sandbox and embeddings from the fake OpenAI server.

What must hold: top-level files are global and a `platform:chat_id` subfolder's files are
that chat's; .md .txt .pdf .docx are read (a PDF keeps its page numbers), other files and
folders are skipped; at start unchanged files are not indexed again, changed ones are, and
documents whose file went away while the daemon was down are removed; while running, a
file is indexed once it holds still, re-indexed when changed, removed when deleted.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.jobs.runner import JobRunner
from core.knowledge.folder import KnowledgeFolder
from core.knowledge.ingest import KIND, JobIntake, ingest_handler
from core.knowledge.reading import SandboxReader
from core.knowledge.service import KnowledgeBase, Scope
from core.media.sandbox import ParseSandbox
from memory.knowledge.folder import KnowledgeFolderDocuments
from memory.turns.store import SqlStorage
from tests.fakes.files import make_docx, make_pdf
from tests.fakes.openai_server import FakeOpenAI
from tests.knowledge.kb_support import Chat, knowledge, opened, parse_sandbox, run_all

GROUP = Scope.chat("telegram", "-100111")
OTHER = Scope.chat("qq", "group:5")


@pytest.fixture
async def kb(storage: SqlStorage, fake: FakeOpenAI) -> AsyncIterator[KnowledgeBase]:
    async with knowledge(storage, fake) as base:
        yield base


@pytest.fixture
async def sandbox() -> AsyncIterator[ParseSandbox]:
    async with parse_sandbox() as box:
        yield box


class Setup:
    def __init__(self, storage: SqlStorage, base: KnowledgeBase, box: ParseSandbox, root: Path):
        self.storage, self.kb, self.root = storage, base, root
        self.chat = Chat()
        handler = ingest_handler(opened(base), SandboxReader(box, max_chars=1_000_000), root)
        self.runner = JobRunner(storage.jobs, {KIND: handler}, self.chat.send, worker="w")

    def folder(self) -> KnowledgeFolder:
        return KnowledgeFolder(
            self.root,
            JobIntake(self.storage.jobs),
            KnowledgeFolderDocuments(self.storage.database),
            self.storage.jobs,
        )

    async def sources(self, scope: Scope) -> list[str]:
        return sorted(d.source for d in await self.kb.list(scope) if d.state == "ready")


@pytest.fixture
async def setup(
    storage: SqlStorage,
    kb: KnowledgeBase,
    sandbox: ParseSandbox,
    tmp_path: Path,
) -> AsyncIterator[Setup]:
    root = tmp_path / "knowledge"
    root.mkdir()
    yield Setup(storage, kb, sandbox, root)


def fill(root: Path) -> None:
    (root / "rules.md").write_text("# Bans\nCheating in the game gets you banned for good.")
    (root / "telegram:-100111").mkdir()
    (root / "telegram:-100111" / "faq.txt").write_text("The club meets on Tuesdays at 19:00.")
    (root / "telegram:-100111" / "manual.pdf").write_bytes(
        make_pdf(["Plug the router in first.", "The reset button is on the back."])
    )
    (root / "qq:group:5").mkdir()
    (root / "qq:group:5" / "notes.docx").write_bytes(make_docx(["Patch 1.2 fixes the lag."]))
    (root / "photo.png").write_bytes(b"\x89PNG not indexed")
    (root / ".hidden.md").write_text("# secret")
    (root / "drafts").mkdir()  # not a chat's name: skipped
    (root / "drafts" / "todo.md").write_text("# later")


async def test_start_indexes_global_and_chat_files_in_their_scopes(setup: Setup) -> None:
    fill(setup.root)
    assert await setup.folder().start() == 4
    await run_all(setup.runner)

    assert await setup.sources(Scope.everyone()) == ["rules.md"]
    assert await setup.sources(GROUP) == ["faq.txt", "manual.pdf"]
    assert await setup.sources(OTHER) == ["notes.docx"]
    hits = await setup.kb.search("where is the reset button", GROUP)
    assert hits[0].label == "manual.pdf · p. 2"
    in_other = await setup.kb.search("reset button router tuesdays", OTHER, top_k=10)
    assert {h.source for h in in_other} <= {"notes.docx", "rules.md"}
    assert setup.chat.sent == []  # the folder's jobs tell no chat


async def test_a_restart_indexes_only_what_changed_and_removes_what_went_away(
    setup: Setup,
) -> None:
    fill(setup.root)
    await setup.folder().start()
    await run_all(setup.runner)
    before = {d.source: d.id for d in await setup.kb.list(GROUP)}

    assert await setup.folder().start() == 0  # nothing changed: nothing read again

    faq = setup.root / "telegram:-100111" / "faq.txt"
    faq.write_text("The club now meets on Fridays at 20:00.")
    future = faq.stat().st_mtime_ns + 60 * 10**9  # written after its document was made
    os.utime(faq, ns=(future, future))
    (setup.root / "rules.md").unlink()
    shutil.rmtree(setup.root / "qq:group:5")
    assert await setup.folder().start() == 3
    await run_all(setup.runner)

    assert await setup.sources(Scope.everyone()) == []
    assert await setup.sources(OTHER) == []
    after = {d.source: d.id for d in await setup.kb.list(GROUP)}
    assert after["manual.pdf"] == before["manual.pdf"]
    assert after["faq.txt"] != before["faq.txt"]
    assert "Fridays" in (await setup.kb.search("when does the club meet", GROUP))[0].text


async def test_while_running_a_file_is_indexed_when_still_changed_and_removed(
    setup: Setup,
) -> None:
    folder = setup.folder()
    assert await folder.start() == 0
    path = setup.root / "schedule.md"
    path.write_text("# Schedule\nTuesdays at 19:00.")
    assert await folder.poll() == 0  # just appeared: wait until it holds still
    assert await folder.poll() == 1
    assert await folder.poll() == 0  # submitted once
    await run_all(setup.runner)
    (first,) = await setup.kb.list(Scope.everyone())

    path.write_text("# Schedule\nFridays at 20:00, from now on.")
    assert await folder.poll() == 0
    assert await folder.poll() == 1
    path.write_text("# Schedule\nSaturdays at 10:00, from now on.")
    await folder.poll()
    assert await folder.poll() == 0  # its previous job is still waiting: no race
    await run_all(setup.runner)
    assert await folder.poll() == 1  # now the latest version
    await run_all(setup.runner)
    (last,) = await setup.kb.list(Scope.everyone())
    assert last.id != first.id
    assert "Saturdays" in (await setup.kb.search("schedule", Scope.everyone()))[0].text

    path.unlink()
    assert await folder.poll() == 1
    await run_all(setup.runner)
    assert await setup.kb.list(Scope.everyone()) == []
    assert await folder.poll() == 0
