"""The real `chatterd` process: chat through a pipe, restart keeps history, db upgrade."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, echo_last_user


def env_for(tmp_path: Path, fake: FakeOpenAI) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATTERD_")}
    env.update(
        OPENAI_BASE_URL=fake.base_url,
        OPENAI_API_KEY="sk-test-not-a-real-key",
        CHATTERD_STORAGE__URL=f"sqlite+aiosqlite:///{tmp_path}/data/chatterd.sqlite",
        CHATTERD_BOT__WORKSPACE=str(tmp_path / "workspace"),
        CHATTERD_LLM__MODEL="fake-model",
        CHATTERD_CONFIG=str(tmp_path / "absent.toml"),
    )
    return env


async def run_cli(
    args: list[str], env: dict[str, str], stdin: str = "", limit_s: float = 60
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(Path(__file__).parent.parent),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), limit_s)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_chat_through_a_pipe_answers_and_exits_on_eof(tmp_path: Path) -> None:
    async with FakeOpenAI(reply=echo_last_user) as fake:
        env = env_for(tmp_path, fake)
        code, out, err = await run_cli(["chat"], env, "hello there\n\n/help\n")
        assert code == 0, err
        assert "hello there" in out  # the fake echoes the user's words back
        assert "/memory" in out  # /help answered without the model
        assert len(fake.requests) == 1
        sent = fake.requests[0]["messages"]
        assert sent[0]["role"] == "system" and sent[-1]["role"] == "user"
        assert sent[-1]["content"].endswith("]: hello there")
        assert "sk-test-not-a-real-key" not in err

        # A new process finds the conversation still there.
        code, out, err = await run_cli(["chat"], env, "second message\n")
        assert code == 0, err
        history = [m["content"] for m in fake.requests[1]["messages"]]
        assert any("hello there" in str(c) for c in history[1:-1])


async def test_db_upgrade_and_memory_cli(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        env = env_for(tmp_path, fake)
        code, out, err = await run_cli(["db", "upgrade"], env)
        assert code == 0, err
        assert (tmp_path / "data" / "chatterd.sqlite").exists()
        code, out, _ = await run_cli(
            ["memory", "add", "--user", "telegram:42", "likes", "green", "tea"], env
        )
        assert code == 0 and "added" in out
        code, out, _ = await run_cli(["memory", "export", "--user", "telegram:42"], env)
        assert '"content": "likes green tea"' in out
        code, out, _ = await run_cli(["memory", "list", "--user", "telegram:43"], env)
        assert "no memories" in out
        code, _, err = await run_cli(["memory", "list", "--user", "discord:1"], env)
        assert code == 2 and "PLATFORM:ID" in err


async def test_run_without_any_model_exits_2_with_advice(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATTERD_", "OPENAI_"))}
    env.update(
        CHATTERD_STORAGE__URL=f"sqlite+aiosqlite:///{tmp_path}/x.sqlite",
        CHATTERD_BOT__WORKSPACE=str(tmp_path / "ws"),
        CHATTERD_LLM__LOCAL_MODEL=str(tmp_path / "missing.gguf"),
        CHATTERD_HTTP__ENABLED="false",
    )
    code, _, err = await run_cli(["run"], env)
    assert code == 2
    assert "[llm]" in err and len(err.strip().splitlines()) == 1
