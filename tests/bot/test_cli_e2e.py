"""The real `chatterd` process: chat through a pipe, restart keeps history, db upgrade."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.commands.table import Commands
from core.admins import Admins
from memory.memories.service import MemoryService
from memory.turns.store import open_storage
from tests.fakes.openai_server import FakeOpenAI, echo_last_user
from tests.rig import msg


def env_for(tmp_path: Path, fake: FakeOpenAI) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATTERD_")}
    env.update(
        OPENAI_BASE_URL=fake.base_url,
        OPENAI_API_KEY="sk-test-not-a-real-key",
        CHATTERD_STORAGE__URL=f"sqlite:///{tmp_path}/data/chatterd.sqlite",
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
        cwd=str(Path(__file__).parents[2]),
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


async def test_forget_by_number_is_the_same_from_chat_and_cli(tmp_path: Path) -> None:
    """Two people with the same memories: one uses /memory in chat, the other is handled
    with `chatterd memory`; the same numbers forget the same items, refusals read alike."""
    async with FakeOpenAI() as fake:
        env = env_for(tmp_path, fake)
        store = await open_storage(env["CHATTERD_STORAGE__URL"])
        try:
            memories = MemoryService(store)
            for user in ("1", "2"):
                for fact in ("likes tea", "lives in Lyon", "plays chess"):
                    await memories.add("telegram", user, fact, author=f"telegram:{user}")
            commands = Commands(
                store=store, admins=Admins(), bot_name="t", context_report=lambda p, c: None
            )

            async def in_chat(text: str) -> str:
                return (await commands.handle(msg(text, sender="1"))).text  # type: ignore[return-value]

            async def lists() -> tuple[list[str], list[str]]:
                return (
                    [m.content for m in await memories.numbered("telegram", "1")],
                    [m.content for m in await memories.numbered("telegram", "2")],
                )

            code, out, _ = await run_cli(["memory", "list", "--user", "telegram:2"], env)
            assert code == 0 and out.splitlines() == [
                "1. plays chess",
                "2. lives in Lyon",
                "3. likes tea",
            ]
            assert await in_chat("/memory forget 2") == "Forgotten: lives in Lyon"
            code, out, err = await run_cli(["memory", "forget", "--user", "telegram:2", "2"], env)
            assert code == 0 and out.strip() == "forgot: lives in Lyon"
            assert "of telegram:2 forgotten by cli" in err and "Lyon" not in err  # audited
            assert await lists() == (["plays chess", "likes tea"], ["plays chess", "likes tea"])

            refusal = await in_chat("/memory forget 3")
            assert refusal == "There is no item 3; there are 2 item(s)."
            code, out, err = await run_cli(["memory", "forget", "--user", "telegram:2", "3"], env)
            assert (code, out, err.strip().splitlines()[-1]) == (1, "", refusal)
            assert await lists() == (["plays chess", "likes tea"], ["plays chess", "likes tea"])
        finally:
            await store.close()


async def test_memory_cli_import_keeps_the_limits(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        env = env_for(tmp_path, fake)
        user = ["--user", "qq:7"]
        lines = "".join(f'{{"content": "fact {n}"}}\n' for n in range(201))
        code, out, err = await run_cli(["memory", "import", *user], env, lines)
        assert code == 1 and out == ""
        assert err.strip().splitlines()[-1] == (
            "Not imported: 0 memories and 201 new ones would be over the limit of 200 for one "
            "person. Nothing was imported."
        )
        too_long = '{"content": "ok"}\n\n' + '{"content": "%s"}\n' % ("x" * 501)
        code, out, err = await run_cli(["memory", "import", *user], env, too_long)
        assert (
            code == 1
            and err.strip().splitlines()[-1] == "line 3: 501 characters is over the limit of 500"
        )
        code, out, _ = await run_cli(["memory", "list", *user], env)
        assert code == 0 and out.strip() == "(no memories)"

        code, out, _ = await run_cli(["memory", "import", *user], env, lines.split("\n", 1)[1])
        assert code == 0 and out.strip() == "imported 200 item(s)"
        code, out, err = await run_cli(["memory", "add", *user, "one", "more"], env)
        assert code == 1 and err.strip().splitlines()[-1].startswith("Not saved: 200 memories")


async def test_run_without_any_model_exits_2_with_advice(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATTERD_", "OPENAI_"))}
    env.update(
        CHATTERD_STORAGE__URL=f"sqlite:///{tmp_path}/x.sqlite",
        CHATTERD_BOT__WORKSPACE=str(tmp_path / "ws"),
        CHATTERD_LLM__LOCAL_MODEL=str(tmp_path / "missing.gguf"),
        CHATTERD_HTTP__ENABLED="false",
    )
    code, _, err = await run_cli(["run"], env)
    assert code == 2
    assert "[llm]" in err and len(err.strip().splitlines()) == 1


# -- global options before or after the subcommand -----------------------------------------

CHATTERD = Path(sys.executable).with_name("chatterd")  # the installed console script


async def run_chatterd(
    args: list[str], env: dict[str, str], stdin: str = ""
) -> tuple[int, str, str]:
    """The real `chatterd` entry point, as a systemd unit or a Docker CMD runs it."""
    assert CHATTERD.is_file(), f"install the project first (pip install -e .): {CHATTERD}"
    proc = await asyncio.create_subprocess_exec(
        str(CHATTERD),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(Path(__file__).parents[2]),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def write_config(path: Path, name: str, tmp_path: Path, llm: str = "") -> Path:
    path.write_text(
        f'[bot]\nname = "{name}"\nworkspace = "{tmp_path / "workspace"}"\n'
        f'[storage]\nurl = "sqlite+aiosqlite:///{tmp_path / (name + ".sqlite")}"\n'
        f"[http]\nenabled = false\n[llm]\n{llm}",
        encoding="utf-8",
    )
    return path


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CHATTERD_", "OPENAI_"))}


async def test_config_option_after_the_subcommand_wins(tmp_path: Path) -> None:
    env = clean_env()
    first = write_config(tmp_path / "first.toml", "FromFirst", tmp_path)
    second = write_config(tmp_path / "second.toml", "FromSecond", tmp_path)
    code, out, err = await run_chatterd(["config", "check", "--config", str(first)], env)
    assert code == 0, err
    assert '"name": "FromFirst"' in out
    code, out, err = await run_chatterd(
        ["--config", str(first), "config", "check", "--config", str(second)], env
    )
    assert code == 0, err
    assert '"name": "FromSecond"' in out and "FromFirst" not in out
    code, out, err = await run_chatterd(["--config", str(first), "config", "check"], env)
    assert code == 0 and '"name": "FromFirst"' in out


async def test_nested_subcommands_take_config_and_log_level_after(tmp_path: Path) -> None:
    env = clean_env()
    config = write_config(tmp_path / "x.toml", "Nested", tmp_path)
    code, out, err = await run_chatterd(["db", "upgrade", "--config", str(config)], env)
    assert code == 0, err
    assert (tmp_path / "Nested.sqlite").exists()  # the database named in x.toml
    args = ["memory", "add", "--user", "telegram:1", "likes", "tea", "--config", str(config)]
    code, out, err = await run_chatterd(args, env)
    assert code == 0 and "added" in out, err
    args = ["memory", "list", "--user", "telegram:1", "--config", str(config)]
    code, out, err = await run_chatterd([*args, "--log-level", "DEBUG"], env)
    assert code == 0 and "likes tea" in out, err
    assert " DEBUG " in err  # asyncio's "Using selector" line, shown only at DEBUG
    code, out, err = await run_chatterd(
        ["--log-level", "DEBUG", *args, "--log-level", "WARNING"], env
    )
    assert code == 0 and "likes tea" in out
    assert " DEBUG " not in err


async def test_run_and_chat_read_the_config_given_after_the_subcommand(tmp_path: Path) -> None:
    env = clean_env()
    gguf = tmp_path / "named-in-config.gguf"
    config = write_config(tmp_path / "run.toml", "Runner", tmp_path, f'local_model = "{gguf}"\n')
    code, _, err = await run_chatterd(["run", "--config", str(config)], env)
    assert code == 2 and str(gguf) in err  # the daemon stopped on the model named in run.toml
    async with FakeOpenAI(reply=echo_last_user) as fake:
        llm = f'base_url = "{fake.base_url}"\napi_key = "sk-test"\nmodel = "fake-model"\n'
        config = write_config(tmp_path / "chat.toml", "Mochi", tmp_path, llm)
        code, out, err = await run_chatterd(["chat", "--config", str(config)], env, "hi there\n")
        assert code == 0, err
        assert "hi there" in out
        assert "Mochi" in fake.requests[0]["messages"][0]["content"]


SUBCOMMANDS = [
    ["run"],
    ["chat"],
    ["db"],
    ["db", "upgrade"],
    ["config"],
    ["config", "check"],
    ["memory"],
    *(["memory", action] for action in ("list", "add", "forget", "clear", "export", "import")),
]


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=" ".join)
def test_every_subcommand_help_shows_the_global_options(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--help"])
    assert stopped.value.code == 0
    shown = capsys.readouterr().out
    assert f"usage: chatterd {' '.join(command)}" in shown
    assert "--config CONFIG" in shown and "--log-level LOG_LEVEL" in shown


async def test_turns_list_shows_accepted_messages_by_state(tmp_path: Path) -> None:
    from memory.db.migrate import Database, parse_url
    from memory.turns.intake import IntakeStore
    from memory.turns.types import IntakeDraft

    async with FakeOpenAI() as fake:
        env = env_for(tmp_path, fake)
        code, _, err = await run_cli(["db", "upgrade"], env)
        assert code == 0, err
        database = Database(parse_url(env["CHATTERD_STORAGE__URL"]))
        try:
            store = IntakeStore(database)
            for mid, text in (("1", "first\nline two"), ("2", "second")):
                draft = IntakeDraft("telegram", "42", "private", "7", "Ann", text, mid)
                assert await store.accept(draft) is not None
            done = await store.by_message("telegram", "42", "2")
            assert done is not None
            await store.move(done.id, "failed", expected=["pending"])
        finally:
            await database.close()
        code, out, err = await run_cli(["turns", "list", "--state", "pending"], env)
        assert code == 0, err
        (line,) = out.splitlines()  # user text stays on one line
        assert "pending" in line and "telegram:42" in line and "'first line two'" in line
        code, out, _ = await run_cli(["turns", "list"], env)
        assert [row.split()[1] for row in out.splitlines()] == ["failed", "pending"]
        code, out, _ = await run_cli(["turns", "list", "--state", "expired"], env)
        assert out.strip() == "no accepted messages in state expired"
        code, _, err = await run_cli(["turns", "list", "--state", "lost"], env)
        assert code == 2 and "invalid choice" in err
