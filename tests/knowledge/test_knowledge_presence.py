"""A turn asks "does this chat have documents?" from memory (core/knowledge/presence.py):
one query per chat until this process writes to the knowledge tables or the TTL passes;
a document added here is seen by the very next turn, one added by another process (a
second store on the same database, as `chatterd kb add` or a replica) within the TTL."""

from __future__ import annotations

from collections.abc import Sequence

from core.knowledge.embedders import OpenAIEmbedder
from core.knowledge.presence import DocumentPresence
from core.knowledge.service import KnowledgeBase, Scope
from core.knowledge.settings import KnowledgeSettings
from memory.knowledge.store import KnowledgeStore
from memory.knowledge.types import GLOBAL_SCOPE
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI

CHAT = Scope.chat("telegram", "-100111")
SCOPES = [CHAT.key, GLOBAL_SCOPE]


class Counting:
    """The real store, with the number of fingerprint queries it answered."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self.queries = 0

    @property
    def writes(self) -> int:
        return self.store.writes

    async def fingerprint(self, scopes: Sequence[str]) -> dict[str, tuple[int, int, str]]:
        self.queries += 1
        return await self.store.fingerprint(scopes)


def _kb(store: KnowledgeStore, fake: FakeOpenAI) -> KnowledgeBase:
    settings = KnowledgeSettings(embeddings="openai", base_url=fake.base_url)
    return KnowledgeBase(store, OpenAIEmbedder(fake.base_url, "embed-a"), settings)


async def test_the_answer_is_kept_until_this_process_writes(
    storage: SqlStorage, fake: FakeOpenAI
) -> None:
    store = KnowledgeStore(storage.database)
    counting = Counting(store)
    presence = DocumentPresence(counting, clock=lambda: 0.0)
    assert not await presence.any(SCOPES)
    assert not await presence.any(SCOPES)
    assert counting.queries == 1
    kb = _kb(store, fake)
    await kb.add("The club meets on Tuesday.", "club.txt", CHAT)
    assert await presence.any(SCOPES)  # the very next turn sees it
    assert counting.queries == 2
    assert await presence.any(SCOPES)
    assert counting.queries == 2
    await kb.close()


async def test_another_process_s_document_is_seen_within_the_ttl(
    storage: SqlStorage, fake: FakeOpenAI
) -> None:
    now = [100.0]
    presence = DocumentPresence(KnowledgeStore(storage.database), ttl_s=5.0, clock=lambda: now[0])
    assert not await presence.any(SCOPES)
    other = _kb(KnowledgeStore(storage.database), fake)  # `chatterd kb add`, a replica
    await other.add("The club meets on Tuesday.", "club.txt", Scope.everyone())
    now[0] += 4.0
    assert not await presence.any(SCOPES)  # still the kept answer
    now[0] += 1.5
    assert await presence.any(SCOPES)
    await other.close()
