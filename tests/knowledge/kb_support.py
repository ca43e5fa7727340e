"""What the knowledge job tests share (tests/knowledge/test_kb_*.py): a chat that records what it
is sent, a knowledge base on the fake OpenAI server's embeddings, the parse sandbox, and
a runner pass that runs every queued job to its end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from core.jobs.runner import JobRunner
from core.knowledge.embedders import OpenAIEmbedder
from core.knowledge.service import KnowledgeBase
from core.knowledge.settings import KnowledgeSettings
from core.media.sandbox import ParseSandbox
from core.messages import OutboundMessage, Sent
from memory.knowledge.store import KnowledgeStore
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI


class Chat:
    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> Sent:
        self.sent.append(message)
        return Sent()

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.sent]


def settings(**kw: Any) -> KnowledgeSettings:
    return KnowledgeSettings(embeddings="openai", base_url="http://unused/v1", **kw)


def open_kb(storage: SqlStorage, fake: FakeOpenAI, **kw: Any) -> KnowledgeBase:
    """A knowledge base on the test database, embedding through the fake server."""
    embedder = OpenAIEmbedder(fake.base_url, "embed-a")
    return KnowledgeBase(KnowledgeStore(storage.database), embedder, settings(**kw))


@asynccontextmanager
async def knowledge(storage: SqlStorage, fake: FakeOpenAI) -> AsyncIterator[KnowledgeBase]:
    base = open_kb(storage, fake)
    try:
        yield base
    finally:
        await base.close()


@asynccontextmanager
async def parse_sandbox() -> AsyncIterator[ParseSandbox]:
    box = ParseSandbox()
    try:
        yield box
    finally:
        await box.close()


def opened(base: KnowledgeBase) -> Callable[[], Awaitable[KnowledgeBase]]:
    """The getter a job handler takes, for a knowledge base already built."""

    async def get() -> KnowledgeBase:
        return base

    return get


async def run_all(runner: JobRunner) -> None:
    while await runner.tick():
        await runner.idle()
    await runner.tick()  # deliver what the last pass stored
