"""The console's gatekeeping without a browser: the sign-in limit and sessions on an
injected clock (no sleeping), the `[web]` config keys, and the HTTP channel's hook."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from bot.config import ConfigError, load_config, mask_secrets
from bot.console.auth import (
    FAILURE_WINDOW,
    FAILURES_PER_ADDRESS,
    FAILURES_TOTAL,
    MAX_SESSIONS,
    Sessions,
    SignInLimiter,
    csrf_matches,
    password_matches,
)
from channels.config import HttpConfig
from channels.http.channel import HttpChannel
from tests.fakes.manual_clock import ManualWallClock

MORNING = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def test_wrong_passwords_from_one_address_block_only_that_address_for_a_while() -> None:
    clock = ManualWallClock(MORNING)
    limiter = SignInLimiter(clock)
    for _ in range(FAILURES_PER_ADDRESS - 1):
        limiter.failed("10.0.0.1")
    assert not limiter.blocked("10.0.0.1")
    limiter.failed("10.0.0.1")
    assert limiter.blocked("10.0.0.1") and not limiter.blocked("10.0.0.2")
    assert 0 < limiter.retry_after_s("10.0.0.1") <= FAILURE_WINDOW.total_seconds() + 1
    assert limiter.retry_after_s("10.0.0.2") == 0
    clock.now += FAILURE_WINDOW
    assert not limiter.blocked("10.0.0.1")
    assert limiter.refused_total == FAILURES_PER_ADDRESS


def test_wrong_passwords_from_many_addresses_block_everyone() -> None:
    limiter = SignInLimiter(ManualWallClock(MORNING))
    for n in range(FAILURES_TOTAL):
        limiter.failed(f"10.0.{n}.1")  # one guess each: no address is over its own limit
    assert limiter.blocked("192.0.2.7")


def test_sessions_expire_close_and_stay_bounded() -> None:
    clock = ManualWallClock(MORNING)
    sessions = Sessions(timedelta(hours=12), clock)
    first = sessions.open()
    assert sessions.find(first.token) is first and sessions.find("guess") is None
    assert sessions.find(None) is None
    clock.now += timedelta(hours=12)
    assert sessions.find(first.token) is None  # expired
    kept = sessions.open()
    sessions.close(kept.token)
    assert sessions.find(kept.token) is None
    opened = [sessions.open() for _ in range(MAX_SESSIONS + 3)]
    assert len(sessions) == MAX_SESSIONS
    assert sessions.find(opened[0].token) is None and sessions.find(opened[-1].token)


def test_password_and_csrf_comparisons() -> None:
    assert password_matches("correct horse", "correct horse")
    assert not password_matches("correct hors", "correct horse")
    assert not password_matches("", "correct horse")
    session = Sessions(timedelta(hours=1), ManualWallClock(MORNING)).open()
    assert csrf_matches(session, session.csrf)
    assert not csrf_matches(session, "") and not csrf_matches(session, None)
    assert not csrf_matches(session, session.csrf[:-1])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_web_password_is_a_secret_from_file_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = load_config(write(tmp_path, '[web]\npassword = "file-secret-1"\n'))
    assert loaded.web.password is not None
    assert mask_secrets(loaded)["web"]["password"] == "***"
    assert "file-secret-1" not in repr(loaded)
    monkeypatch.setenv("CHATTERD_WEB__PASSWORD", "env-secret-22")
    from_env = load_config(write(tmp_path, '[web]\npassword = "file-secret-1"\n'))
    assert from_env.web.password is not None
    assert from_env.web.password.get_secret_value() == "env-secret-22"
    monkeypatch.delenv("CHATTERD_WEB__PASSWORD")
    defaults = load_config(tmp_path / "absent.toml", {})
    assert (defaults.web.enabled, defaults.web.password) == (True, None)


def test_a_short_web_password_stops_the_start_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config: web\.password: .*at least 8 characters"):
        load_config(write(tmp_path, '[web]\npassword = "short"\n'), {})


def test_config_check_masks_the_web_password(tmp_path: Path) -> None:
    path = write(tmp_path, '[web]\npassword = "do-not-print-me"\n')
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--config", str(path), "config", "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "do-not-print-me" not in result.stdout + result.stderr
    assert '"password": "***"' in result.stdout


async def test_the_http_channel_serves_routes_other_parts_register() -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="from a registrar")

    def register(app: web.Application) -> None:
        app.router.add_get("/extra", hello)

    config = HttpConfig.model_validate({"host": "127.0.0.1", "port": 0})
    channel = HttpChannel(config, dict, registrars=[register])

    async def never(message: object) -> None:
        raise AssertionError("no message expected")

    await channel.start(never)  # type: ignore[arg-type]
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{channel.port}/extra") as answer:
                assert (answer.status, await answer.text()) == (200, "from a registrar")
            async with session.get(f"http://127.0.0.1:{channel.port}/healthz") as health:
                assert health.status == 200
    finally:
        await channel.stop()
