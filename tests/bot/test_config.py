"""Config: defaults, TOML, env overrides, conventional variables, one-line errors."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import ConfigError, config_path, load_config, mask_secrets


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for var in list(os.environ):
        if var.startswith("CHATTERD_") or var in (
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "TELEGRAM_BOT_TOKEN",
        ):
            monkeypatch.delenv(var)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path: Path) -> None:
    settings = load_config(tmp_path / "absent.toml")
    assert settings.storage.url == "sqlite:///data/chatterd.sqlite"
    assert settings.http.enabled is True and settings.http.port == 8080
    assert settings.telegram.poll_stall_s == 90 and settings.telegram.rate_limit_per_min == 20
    assert (
        settings.onebot.path == "/onebot/v11/ws" and settings.onebot.allow_private_media_hosts == []
    )
    assert settings.vision.enabled is False and settings.vision.mode == "describe"
    assert settings.groups.store_untriggered is True and settings.tools.max_rounds == 3


def test_toml_then_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(
        tmp_path, '[llm]\nmodel = "from-toml"\ntimeout_s = 5\n[bot]\nadmins = ["telegram:1"]\n'
    )
    monkeypatch.setenv("CHATTERD_LLM__MODEL", "from-env")
    settings = load_config(path)
    assert settings.llm.model == "from-env"
    assert settings.llm.timeout_s == 5
    assert settings.bot.admins == ["telegram:1"]


def test_conventional_variables_fill_in_but_do_not_beat_explicit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-conventional")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    settings = load_config(write(tmp_path, '[llm]\nbase_url = "http://explicit/v1"\n'))
    assert (
        settings.llm.api_key is not None
        and settings.llm.api_key.get_secret_value() == "sk-conventional"
    )
    assert settings.llm.base_url == "http://explicit/v1"
    assert (
        settings.telegram.token is not None
        and settings.telegram.token.get_secret_value() == "123:abc"
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[llm]\ntimeout_s = -1\n", "llm.timeout_s"),
        ("[llm]\ntimout_s = 3\n", "llm.timout_s"),
        ('[bot]\nadmins = ["discord:1"]\n', "bot.admins"),
        ('[bot]\ntimezone = "Mars/Base"\n', "bot.timezone"),
        ('[vision]\nmode = "dream"\n', "vision.mode"),
        ('[storage]\nurl = "mysql://x/y"\n', "storage.url"),
        ("[nonsense]\nx = 1\n", "nonsense"),
        ('[images]\nallow = "auto"\n', "images.allow"),
        ('[jobs]\nspawn_allow = "auto"\n', "jobs.spawn_allow"),
        ('[sandbox]\nallow = ["telegram"]\n', "sandbox.allow"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"config: {key}")


@pytest.mark.parametrize(
    "url",
    ["sqlite:///data/x.sqlite", "sqlite+aiosqlite:///data/x.sqlite", "postgresql+asyncpg://h/d"],
)
def test_storage_url_forms_that_work(tmp_path: Path, url: str) -> None:
    settings = load_config(write(tmp_path, f'[storage]\nurl = "{url}"\n'))
    assert settings.storage.url == url


def test_bad_env_value_names_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATTERD_HTTP__PORT", "eighty")
    with pytest.raises(ConfigError, match=r"^config: http.port: "):
        load_config(tmp_path / "absent.toml")


def test_broken_toml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, "[llm\nmodel="))
    assert "\n" not in str(caught.value)


def test_config_path_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATTERD_CONFIG", "/etc/chatterd.toml")
    assert config_path("given.toml") == Path("given.toml")
    assert config_path(None) == Path("/etc/chatterd.toml")
    monkeypatch.delenv("CHATTERD_CONFIG")
    assert config_path(None) == Path("config.toml")


def test_secrets_are_masked(tmp_path: Path) -> None:
    path = write(tmp_path, '[llm]\napi_key = "sk-very-secret"\n[http]\ntoken = "tok-secret"\n')
    data = mask_secrets(load_config(path))
    assert data["llm"]["api_key"] == "***" and data["http"]["token"] == "***"
    assert "sk-very-secret" not in repr(data) and "tok-secret" not in repr(data)


def test_example_config_is_valid_and_complete(tmp_path: Path) -> None:
    """config.example.toml documents every key: loading it gives exactly the defaults."""
    example = Path(__file__).parents[2] / "config.example.toml"
    loaded = load_config(example).model_dump()
    defaults = load_config(tmp_path / "absent.toml").model_dump()
    assert loaded == defaults
    text = example.read_text(encoding="utf-8")
    for section, values in defaults.items():
        assert f"[{section}]" in text
        for key in values:
            assert f"{key} =" in text or f"# {key} =" in text, f"{section}.{key} undocumented"


def test_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[llm]\ntemperature = 9\n")
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--config", str(path), "config", "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "llm.temperature" in result.stderr


def test_cli_config_check_masks(tmp_path: Path) -> None:
    path = write(tmp_path, '[llm]\napi_key = "sk-hidden-value"\n')
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--config", str(path), "config", "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "sk-hidden-value" not in result.stdout and '"api_key": "***"' in result.stdout


def test_forward_onebot_needs_a_ws_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config: onebot: .*forward_ws mode needs url"):
        load_config(write(tmp_path, '[onebot]\nmode = "forward_ws"\n'))
    ok = load_config(
        write(tmp_path, '[onebot]\nmode = "forward_ws"\nurl = "ws://127.0.0.1:3001"\n')
    )
    assert ok.onebot.url == "ws://127.0.0.1:3001"


def test_telegram_webhook_checks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config: telegram: .*webhook_url"):
        load_config(write(tmp_path, '[telegram]\nmode = "webhook"\n'))
    with pytest.raises(ConfigError, match=r"^config: telegram.webhook_secret: "):
        load_config(write(tmp_path, '[telegram]\nwebhook_secret = "has spaces!"\n'))


def test_added_knobs_have_defaults_env_overrides_and_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_config(tmp_path / "absent.toml")
    assert settings.bot.max_in_flight == 64
    assert settings.context.compaction is True and settings.context.compaction_min_turns == 10
    assert settings.vision.max_side == 2048
    monkeypatch.setenv("CHATTERD_BOT__MAX_IN_FLIGHT", "256")
    monkeypatch.setenv("CHATTERD_CONTEXT__COMPACTION", "false")
    settings = load_config(tmp_path / "absent.toml")
    assert settings.bot.max_in_flight == 256 and settings.context.compaction is False
    monkeypatch.setenv("CHATTERD_BOT__MAX_IN_FLIGHT", "0")
    with pytest.raises(ConfigError, match="max_in_flight"):
        load_config(tmp_path / "absent.toml")


def test_rate_limit_is_per_bot_and_the_telegram_key_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.config")

    def moved_lines() -> list[str]:
        lines = [r.getMessage() for r in caplog.records if r.name == "bot.config"]
        caplog.clear()
        return lines

    settings = load_config(tmp_path / "absent.toml")
    assert settings.bot.rate_limit_per_min == 20 and moved_lines() == []
    settings = load_config(write(tmp_path, "[bot]\nrate_limit_per_min = 0\n"))
    assert settings.bot.rate_limit_per_min == 0 and moved_lines() == []

    # The old key, set explicitly, becomes [bot]'s value, with one line saying it moved.
    settings = load_config(write(tmp_path, "[telegram]\nrate_limit_per_min = 5\n"))
    assert settings.bot.rate_limit_per_min == 5
    (line,) = moved_lines()
    assert "[telegram] rate_limit_per_min moved to [bot] rate_limit_per_min" in line

    # Both set: [bot] wins, and the line says the old one is ignored.
    both = "[bot]\nrate_limit_per_min = 7\n[telegram]\nrate_limit_per_min = 5\n"
    settings = load_config(write(tmp_path, both))
    assert settings.bot.rate_limit_per_min == 7
    (line,) = moved_lines()
    assert "moved to [bot]" in line and "ignored" in line

    monkeypatch.setenv("CHATTERD_TELEGRAM__RATE_LIMIT_PER_MIN", "3")
    assert load_config(tmp_path / "absent.toml").bot.rate_limit_per_min == 3
    assert len(moved_lines()) == 1
    monkeypatch.setenv("CHATTERD_BOT__RATE_LIMIT_PER_MIN", "-1")
    with pytest.raises(ConfigError, match=r"^config: bot.rate_limit_per_min: "):
        load_config(tmp_path / "absent.toml")
