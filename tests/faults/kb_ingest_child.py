"""A process that runs "kb_add" jobs and nothing else, for the kill -9 test
(tests/faults/test_kb_ingest_lost.py): `python -m tests.faults.kb_ingest_child <db url>
<embeddings base url>`. It is killed with SIGKILL while a job waits on the embeddings.
"""

from __future__ import annotations

import asyncio
import sys

from core.jobs.runner import JobRunner
from core.knowledge.embedders import OpenAIEmbedder
from core.knowledge.ingest import KIND, ingest_handler
from core.knowledge.reading import SandboxReader
from core.knowledge.service import KnowledgeBase
from core.knowledge.settings import KnowledgeSettings
from core.media.sandbox import ParseSandbox
from core.messages import OutboundMessage, Sent
from memory.knowledge.store import KnowledgeStore
from memory.turns.store import open_storage
from tests.knowledge.kb_support import opened

LEASE_S = 2.0


async def main(url: str, embeddings: str) -> None:
    storage = await open_storage(url)
    settings = KnowledgeSettings(embeddings="openai", base_url=embeddings)
    kb = KnowledgeBase(
        KnowledgeStore(storage.database), OpenAIEmbedder(embeddings, "embed-a"), settings
    )

    async def send(message: OutboundMessage) -> Sent:
        print("SENT", message.text, flush=True)
        return Sent()

    handler = ingest_handler(opened(kb), SandboxReader(ParseSandbox(), 1_000_000))
    runner = JobRunner(
        storage.jobs, {KIND: handler}, send, worker="doomed", lease_s=LEASE_S, interval_s=0.1
    )
    print("READY", flush=True)
    await runner.run(asyncio.Event())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
