"""EmbeddedModel: child-process lifecycle on loopback, and (marked) the real llama.cpp model.

The lifecycle tests run FakeOpenAI as the child (`server_module`), so they exercise the
real spawn / readiness / stop / kill code without the optional [local] extra.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.wiring.embedded import (
    EmbeddedModel,
    EmbeddedModelFailed,
    EmbeddedModelUnavailable,
    bundled_gguf,
    embedded_available,
    unavailable_reason,
)
from core.llm import OpenAIProvider

REPO = Path(__file__).resolve().parents[2]
STAND_IN = "tests.fakes.openai_server"


@pytest.fixture
def gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)  # the child imports the stand-in server from the repo
    path = tmp_path / "tiny-test-model.gguf"
    path.write_bytes(b"GGUF not really")
    return path


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a reaper (containers may lack one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" not in status


async def eventually(predicate, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# -- availability and messages ----------------------------------------------------------


def test_default_message_is_one_line_and_says_what_to_do() -> None:
    message = EmbeddedModelUnavailable.default_message()
    assert "\n" not in message
    assert "[llm]" in message and "base_url" in message and "chatterd[local]" in message


def test_missing_local_model_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    assert not embedded_available(missing)
    reason = unavailable_reason(missing)
    assert reason is not None and "local_model" in reason and "nope.gguf" in reason


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is not None, reason="the [local] extra is installed here"
)
def test_without_the_extra_entering_fails_clearly() -> None:
    assert not embedded_available(None)

    async def enter() -> None:
        async with EmbeddedModel():
            pass

    with pytest.raises(EmbeddedModelUnavailable, match="chatterd\\[local\\]"):
        asyncio.run(enter())


# -- lifecycle with a stand-in server -------------------------------------------------------


async def test_starts_answers_and_stops(gguf: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.wiring.embedded")
    model = EmbeddedModel(gguf, server_module=STAND_IN, extra_args=["--reply", "hi from child"])
    async with model as base_url:
        assert base_url == model.base_url and base_url.startswith("http://127.0.0.1:")
        pid = model.pid
        assert pid is not None and alive(pid)
        provider = OpenAIProvider(base_url, None, model.model_name, timeout_s=5, max_retries=0)
        try:
            result = await provider.chat([{"role": "user", "content": "hello"}])
        finally:
            await provider.close()
        assert result.text == "hi from child"
        assert model.model_name == "tiny-test-model"
    assert not alive(pid)
    await model.stop()  # a second stop is harmless
    assert "tiny" in caplog.text and "[llm] base_url" in caplog.text  # the one start line
    assert "unexpectedly" not in caplog.text  # stopped on purpose


async def test_child_that_crashes_fails_fast_with_its_last_words(gguf: Path) -> None:
    model = EmbeddedModel(gguf, server_module="tests.fakes.no_such_server", startup_timeout_s=30)
    started = time.monotonic()
    with pytest.raises(EmbeddedModelFailed) as info:
        async with model:
            pass
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert "\n" not in message and "exited while starting" in message
    assert "No module named" in message and "[llm]" in message


async def test_child_never_ready_times_out_and_is_killed(gguf: Path) -> None:
    model = EmbeddedModel(
        gguf, server_module=STAND_IN, startup_timeout_s=1.0, extra_args=["--startup-delay", "60"]
    )
    pids: list[int] = []
    task = asyncio.create_task(model.start())
    await eventually(lambda: model.pid is not None)
    assert model.pid is not None
    pids.append(model.pid)
    with pytest.raises(EmbeddedModelFailed, match="did not answer within 1s"):
        await task
    assert not alive(pids[0]) and model.pid is None


async def test_child_ignoring_sigterm_is_killed(
    gguf: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = EmbeddedModel(
        gguf, server_module=STAND_IN, stop_timeout_s=0.3, extra_args=["--ignore-sigterm"]
    )
    async with model:
        pid = model.pid
        assert pid is not None
    assert not alive(pid)
    assert "killing it" in caplog.text


async def test_unexpected_exit_is_logged(gguf: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="bot.wiring.embedded")
    model = EmbeddedModel(gguf, server_module=STAND_IN)
    async with model:
        assert model.pid is not None
        os.kill(model.pid, signal.SIGKILL)
        await eventually(lambda: "exited unexpectedly" in caplog.text)


def test_child_dies_with_a_killed_parent(gguf: Path, tmp_path: Path) -> None:
    """A daemon killed with SIGKILL must not leave an orphaned model server behind."""
    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signal is Linux-only")
    script = (
        "import asyncio, os, sys\n"
        "from pathlib import Path\n"
        "from bot.wiring.embedded import EmbeddedModel\n"
        "async def main():\n"
        f"    m = EmbeddedModel(Path({str(gguf)!r}), server_module={STAND_IN!r})\n"
        "    await m.start()\n"
        "    print(m.pid, flush=True)\n"
        "    os._exit(9)\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    child = int(out.stdout.strip())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling with a deadline
    assert not alive(child)


# -- the real embedded model (needs the [local] extra) --------------------------------------


@pytest.mark.local_model
async def test_real_embedded_model_replies_within_60s() -> None:
    assert bundled_gguf() is not None, "install chatterd[local]"
    async with asyncio.timeout(60):
        async with EmbeddedModel() as base_url:
            provider = OpenAIProvider(
                base_url,
                None,
                "SmolLM2-135M-Instruct",
                timeout_s=50,
                max_retries=0,
                temperature=0.2,
            )
            try:
                result = await provider.chat(
                    [
                        {"role": "system", "content": "You are a friendly assistant."},
                        {"role": "user", "content": "Say hello in one short sentence."},
                    ],
                    max_tokens=48,
                )
            finally:
                await provider.close()
    assert result.text.strip()
    assert result.completion_tokens and result.completion_tokens > 0
