"""Every start-up failure stops `chatterd run` the same way a bad config value does:
exit status 2 and one line saying what to fix; the traceback only with --log-level debug."""

from __future__ import annotations

from pathlib import Path

from tests.bot.test_cli_e2e import env_for, run_cli
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram


async def test_a_refused_telegram_token_exits_2_with_one_line_naming_the_key(
    tmp_path: Path,
) -> None:
    async with FakeOpenAI(reply="unused") as chat, FakeTelegram() as tg:
        env = env_for(tmp_path, chat)
        env.update(
            CHATTERD_HTTP__ENABLED="false",
            CHATTERD_TELEGRAM__ENABLED="true",
            CHATTERD_TELEGRAM__TOKEN="999:not-the-token-the-api-knows",  # getMe answers 401
            CHATTERD_TELEGRAM__API_BASE_URL=tg.root,
        )
        code, _, err = await run_cli(["run"], env)
        assert code == 2
        (line,) = [text for text in err.splitlines() if "chatterd:" in text or "Traceback" in text]
        assert "[telegram] token" in line and "Traceback" not in err
        assert "not-the-token" not in err  # the secret itself is never printed

        code, _, err = await run_cli(["--log-level", "debug", "run"], env)
        assert code == 2
        assert "Traceback" in err and "[telegram] token" in err.splitlines()[-1]
        assert "not-the-token" not in err


async def test_a_port_in_use_exits_2_naming_the_http_settings(tmp_path: Path) -> None:
    async with FakeOpenAI(reply="unused") as chat:
        env = env_for(tmp_path, chat)
        port = str(chat.port)  # taken: the fake model listens there
        env.update(
            CHATTERD_HTTP__ENABLED="true",
            CHATTERD_HTTP__HOST="127.0.0.1",
            CHATTERD_HTTP__PORT=port,
        )
        code, _, err = await run_cli(["run"], env)
    assert code == 2
    assert "Traceback" not in err
    assert "[http] host and port" in err.splitlines()[-1]
