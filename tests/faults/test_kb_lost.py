"""Ingestion across SIGKILL in the real daemon: `chatterd run` is killed while a shared PDF
that `/kb add` queued waits on the embeddings; after the restart the document is
searchable whole, stored once, and the group is told once.

Counted on the wire: what the fake Bot API was sent, and the embeddings requests the fake
OpenAI server got; checked in the database: one document, ready, with its passages.
Runs on SQLite, and on PostgreSQL with CHATTERD_TEST_DATABASE_URL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory.db.migrate import Database, parse_url
from memory.knowledge.folder import KnowledgeFolderDocuments
from memory.knowledge.types import DocumentInfo
from tests.fakes.files import make_pdf
from tests.fakes.openai_server import content_text
from tests.fakes.telegram_server import entity, group_chat
from tests.faults.test_nothing_lost import PEOPLE, Harness
from tests.faults.test_reminders_lost import until

pytestmark = pytest.mark.faults

CLUB = group_chat(-100700, "Reading club")
ANN = PEOPLE[0]
PAGES = [
    "Welcome to the reading club handbook.",
    "Quarterly revenue of the club shop grew by twelve percent thanks to used books.",
]


def extra(harness: Harness) -> dict[str, str]:
    return {
        "CHATTERD_BOT__ADMINS": f'["telegram:{ANN["id"]}"]',
        "CHATTERD_KNOWLEDGE__EMBEDDINGS": "openai",
        "CHATTERD_KNOWLEDGE__BASE_URL": harness.model.base_url,
        "CHATTERD_JOBS__LEASE_S": "5",  # the dead process's job is taken over after 5 s
    }


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


async def documents(database_url: str) -> list[DocumentInfo]:
    database = Database(parse_url(database_url))
    try:
        return await KnowledgeFolderDocuments(database).by_author_prefix("")
    finally:
        await database.close()


def texts(harness: Harness) -> list[str]:
    return [str(sent["text"]) for sent in harness.tg.sent if int(sent["chat_id"]) == CLUB["id"]]


async def test_sigkill_while_embedding_a_shared_pdf_indexes_it_once_after_the_restart(
    harness: Harness, database_url: str
) -> None:
    data = make_pdf(PAGES)
    doc: dict[str, Any] = {
        "file_id": harness.tg.add_file(data),
        "file_unique_id": "u-1",
        "file_name": "report.pdf",
        "mime_type": "application/pdf",
        "file_size": len(data),
    }
    harness.model.embedding_latency_s = 600.0  # the first daemon waits here until killed
    first = await harness.daemon(extra(harness))
    shared = harness.tg.push_message(CLUB, ANN, None, caption="the handbook", document=doc)
    command = [entity("bot_command", "/kb add", "/kb")]
    harness.tg.push_message(CLUB, ANN, "/kb add", entities=command, reply_to_message=shared)
    await until(lambda: harness.model.embedding_requests, [first])
    (accepted,) = await documents(database_url)
    assert accepted.state == "indexing" and accepted.chunk_count == 0  # never half
    first.kill()
    await first.wait()
    assert texts(harness) == ["📚 adding report.pdf (job #1); I will say when it is searchable."]

    harness.model.embedding_latency_s = 0.0
    second = await harness.daemon(extra(harness))
    await until(lambda: len(texts(harness)) == 2, [first, second])
    (doc_row,) = await documents(database_url)  # once: the row the dead daemon accepted
    assert doc_row.id == accepted.id and doc_row.state == "ready" and doc_row.chunk_count == 2
    assert texts(harness)[1] == f"📚 added report.pdf (#{doc_row.id}): 2 passages"

    words = "@chatterd_test_bot how did the shop do?"
    mention = [entity("mention", words, "@chatterd_test_bot")]
    harness.tg.push_message(CLUB, PEOPLE[1], words, entities=mention)
    await until(lambda: len(texts(harness)) == 3, [second])
    await second.terminate()
    seen = "\n".join(content_text(m.get("content")) for m in harness.model.requests[-1]["messages"])
    assert "twelve percent" in seen and "report.pdf · p. 2" in seen
    assert len([t for t in texts(harness) if t.startswith("📚 added")]) == 1
