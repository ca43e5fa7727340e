"""core/text/tokens.py and bpe.py: exact offline counts equal to tiktoken's; the estimate."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.text.bpe import ENCODINGS, BpeOpenAICounter, TiktokenCounter, shipped_rank_file
from core.text.tokens import (
    IMAGE_TOKENS,
    IMAGE_TOKENS_LOW,
    EstimateCounter,
    TokenCounter,
    count_messages,
    get_counter,
    message_tokens,
    resolve_encoding,
)

ROOT = Path(__file__).resolve().parents[2]
URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
SAMPLES = [
    "今天天气很好，我们去公园散步吧。你觉得这个方案怎么样？",
    "The quick brown fox jumps over the lazy dog. Could you search for the latest news?",
    "我刚用 Python 写了一个 script，可以自动 download 所有的 PDF 文件。GPT-4o 的 context 是 128k。",
    "[小明]: 明天 meeting 改到 3pm 了 👍🎉 ok?",
    "def f(x):\n    return {k: v for k, v in x.items() if v is not None}\n",
    "Привет, как дела? 今日はいい天気ですね。안녕하세요 👨‍👩‍👧 ❤️",
    "Order 1234567890, total 98765.43, ids 1,2,3,4,5,6,7,8,9,10",
    "<|endoftext|> is typed by a user, not a special token",
]


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """tiktoken's own registry encodings (its pat_str, specials, hash check), fed offline.

    The rank files come from bpe-openai, placed where tiktoken's cache looks for its
    download; tiktoken verifies them against the sha256 it pins, so this fixture also
    proves the shipped files are the ones tiktoken expects.
    """
    import tiktoken

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name, url in URLS.items():
        raw = shipped_rank_file(name).read_bytes()
        key = hashlib.sha1(url.encode()).hexdigest()
        (cache / key).write_bytes(gzip.decompress(raw))
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return {name: tiktoken.get_encoding(name) for name in URLS}
    finally:
        if saved is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved


def ref_count(reference: dict[str, object], name: str, text: str) -> int:
    return len(reference[name].encode_ordinary(text))  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(URLS))
def test_constants_match_tiktoken_registry(reference: dict[str, object], name: str) -> None:
    enc = reference[name]
    assert ENCODINGS[name]["pat_str"] == enc._pat_str  # type: ignore[attr-defined]
    assert dict(ENCODINGS[name]["special_tokens"]) == enc._special_tokens  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(URLS))
@pytest.mark.parametrize("backend", ["bpe_openai", "tiktoken"])
def test_samples_equal_reference(reference: dict[str, object], name: str, backend: str) -> None:
    counter = get_counter(name, backend=backend)  # type: ignore[arg-type]
    assert counter.exact and counter.name == name
    for text in SAMPLES + ["", " ", "\n\n", "a" * 1000]:
        assert counter.count(text) == ref_count(reference, name, text), text


MIXED = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from("的一是不了人我在有他这为之大来以个中上们到说国和。，！？"),
        st.sampled_from(list("abcdefghijklmnop QRSTUV 0123456789 .,!?'\n\t/<>") + ["😀", "👍"]),
    ),
    max_size=300,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=MIXED)
def test_random_text_counts_equal_reference(reference: dict[str, object], text: str) -> None:
    for name in URLS:
        expected = ref_count(reference, name, text)
        assert BpeOpenAICounter(name).count(text) == expected
        assert TiktokenCounter(name).count(text) == expected


def test_lone_surrogates_are_counted_like_tiktoken(reference: dict[str, object]) -> None:
    for text in ["\ud800", "a\ud83d\ude00b", "x\udfffy z"]:
        for name in URLS:
            assert BpeOpenAICounter(name).count(text) == ref_count(reference, name, text)


@pytest.mark.parametrize(
    "text",
    ["a" * 100_000, " " * 100_000, "中" * 100_000, "1" * 100_000, "!" * 100_000, " \n" * 50_000],
)
def test_long_pathological_inputs_are_fast_and_exact(
    reference: dict[str, object], text: str
) -> None:
    counter = get_counter()
    start = time.perf_counter()
    got = counter.count(text)
    elapsed = time.perf_counter() - start
    assert got == ref_count(reference, "o200k_base", text)
    assert elapsed < 1.0, f"{elapsed:.3f}s for 100k chars"


@pytest.mark.parametrize("text", ["a" * 1_000_000, " a" * 250_000], ids=["1M chars", "250k tokens"])
def test_texts_bpe_openai_refuses_are_still_counted_exactly(
    reference: dict[str, object], text: str
) -> None:
    """bpe-openai refuses a million characters or 200,000 tokens; those go to tiktoken."""
    assert BpeOpenAICounter("o200k_base").count(text) == ref_count(reference, "o200k_base", text)


def test_get_counter_names_and_errors() -> None:
    assert get_counter().name == "o200k_base"
    assert isinstance(get_counter(), TokenCounter)
    assert resolve_encoding("gpt-4o-mini") == "o200k_base"
    assert resolve_encoding("gpt-4-0613") == "cl100k_base"
    assert resolve_encoding("gpt-3.5-turbo") == "cl100k_base"
    assert resolve_encoding(" O200K_BASE ") == "o200k_base"
    assert get_counter("gpt-4").name == "cl100k_base"
    estimate = get_counter("estimate")
    assert isinstance(estimate, EstimateCounter) and estimate.exact is False
    with pytest.raises(ValueError, match="unknown tokenizer 'qwen-7b'"):
        get_counter("qwen-7b")
    with pytest.raises(ValueError, match="unknown backend"):
        get_counter(backend="rust")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        get_counter().count(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        EstimateCounter().count(None)  # type: ignore[arg-type]


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_works_offline_with_empty_tiktoken_cache(tmp_path: Path) -> None:
    code = """
import socket
def refuse(*a, **k):
    raise OSError("network disabled in this test")
socket.socket = refuse
socket.create_connection = refuse
from core.text.tokens import get_counter
a = get_counter("o200k_base", backend="bpe_openai")
b = get_counter("cl100k_base", backend="tiktoken")
print(a.count("hello world"), b.count("hello world"), a.exact, b.exact)
"""
    empty = tmp_path / "cache"
    empty.mkdir()
    proc = _run(code, {"TIKTOKEN_CACHE_DIR": str(empty)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "2", "True", "True"]
    assert list(empty.iterdir()) == []  # nothing written to tiktoken's cache either


def test_falls_back_to_a_labelled_estimate_without_tokenizers() -> None:
    code = """
import logging, sys
sys.modules["bpe_openai"] = None
sys.modules["tiktoken"] = None
logging.basicConfig(level=logging.WARNING)
from core.text.bpe import TokenizerUnavailable
from core.text.tokens import get_counter
c = get_counter()
print(type(c).__name__, c.exact, c.count("今天天气很好"))
try:
    get_counter(backend="bpe_openai")
except TokenizerUnavailable as exc:
    print("unavailable")
"""
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["EstimateCounter", "False", "7", "unavailable"]
    assert "token counts are estimates" in proc.stderr


@pytest.mark.parametrize("name", sorted(URLS))
def test_estimate_is_cjk_aware_and_rarely_low(name: str) -> None:
    exact, estimate = get_counter(name), EstimateCounter()
    assert estimate.count("") == 0
    assert estimate.count("中文字符测试") >= 6  # about one token per CJK character
    for text in SAMPLES:
        for times in (1, 10):
            ratio = estimate.count(text * times) / exact.count(text * times)
            assert 0.85 <= ratio <= 3.0, (text, ratio)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_estimate_handles_any_text(text: str) -> None:
    value = EstimateCounter().count(text)
    assert value >= 0
    assert (value == 0) == (text == "")


def test_count_messages_matches_openai_cookbook() -> None:
    """The cookbook's example: 129 prompt tokens for gpt-4-0613, 124 for gpt-4o (API-confirmed)."""
    messages = [
        {
            "role": "system",
            "content": "You are a helpful, pattern-following assistant that translates "
            "corporate jargon into plain English.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "New synergies will help drive top-line growth.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Things working well together will increase revenue.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "Let's circle back when we have more bandwidth to touch base on "
            "opportunities for increased leverage.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Let's talk later when we're less busy about how to do better.",
        },
        {
            "role": "user",
            "content": "This late pivot means we don't have time to boil the ocean for the "
            "client deliverable.",
        },
    ]
    assert count_messages(messages, get_counter("gpt-4-0613")) == 129
    assert count_messages(messages, get_counter("gpt-4o")) == 124


def test_count_messages_parts_images_and_tool_calls() -> None:
    c = get_counter()
    assert count_messages([], c) == 3
    plain = {"role": "user", "content": "hello"}
    assert message_tokens(plain, c) == 3 + c.count("user") + c.count("hello")
    parts = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 9999}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
        ],
    }
    expected = 3 + c.count("user") + c.count("what is this?") + IMAGE_TOKENS + IMAGE_TOKENS_LOW
    assert message_tokens(parts, c) == expected
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    assert message_tokens(call, c) > 3 + c.count("assistant")
    tool = {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "ok"}
    assert message_tokens(tool, c) == 3 + sum(c.count(v) for v in tool.values()) + 1
    with pytest.raises(TypeError):
        count_messages(["not a dict"], c)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        count_messages([{"role": "user", "content": 5}], c)
