"""Telegram channel under failure: 429, stalled polling, 409 Conflict, malformed updates,
bad tokens, and webhook mode."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable

import aiohttp
import pytest

from channels.config import TelegramConfig
from channels.telegram.channel import TelegramChannel, TelegramStartError
from core.messages import Reply
from tests.channels.test_telegram import FAST, echo, running
from tests.fakes.door import start_answering
from tests.fakes.telegram_server import Inbox, private_chat, user

ALICE = user(1001, "Alice")


async def until(condition: Callable[[], bool], within_s: float = 5.0) -> None:
    """Poll a cheap in-process condition until true, with a deadline."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.02)


def logged(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


async def test_429_retry_after_is_honoured_then_the_reply_goes_out(tg) -> None:
    tg.fail("sendMessage", 429, retry_after=1)
    async with running(tg, Inbox(echo)):
        tg.push_message(private_chat(ALICE), ALICE, "hi")
        first, second = await tg.wait_for("sendMessage", count=2)
    assert second.at - first.at >= 0.95  # waited as told, not a blind immediate retry
    assert [p["text"] for p in tg.sent] == ["echo: hi"]


async def test_send_failing_after_retries_is_logged_and_later_messages_still_flow(
    tg, caplog
) -> None:
    tg.fail("sendMessage", 502, times=3)  # FAST allows 3 attempts
    async with running(tg, Inbox(echo)):
        tg.push_message(private_chat(ALICE), ALICE, "lost reply")
        await tg.wait_for("sendMessage", count=3)
        tg.push_message(private_chat(ALICE), ALICE, "next one")
        await tg.wait_for("sendMessage", count=4)
    assert [p["text"] for p in tg.sent] == ["echo: next one"]
    assert logged(caplog, "message to telegram:1001 not delivered") == 1


async def test_stalled_polling_is_restarted_by_the_watchdog(tg, caplog) -> None:
    caplog.set_level(logging.INFO)
    inbox = Inbox(echo)
    async with running(tg, inbox, poll_stall_s=1.0) as channel:
        tg.push_message(private_chat(ALICE), ALICE, "before")
        await tg.wait_for("sendMessage")
        tg.stall()  # getUpdates now hangs without an answer, like a half-open connection
        await until(lambda: channel.health().state == "reconnecting")
        await until(lambda: logged(caplog, "restarting polling") >= 1)
        await tg.wait_for("deleteWebhook", count=2)  # the updater really started again
        tg.resume()
        tg.push_message(private_chat(ALICE), ALICE, "after")
        await tg.wait_for("sendMessage", count=2)
        await until(lambda: channel.health().state == "running")
        last_ok = channel.health().last_ok
    assert [m.text for m in inbox.messages] == ["before", "after"]
    assert last_ok is not None


async def test_409_conflict_is_reported_once_and_polling_resumes(tg, caplog) -> None:
    caplog.set_level(logging.INFO)
    tg.set_conflict(True)
    inbox = Inbox(echo)
    async with running(tg, inbox) as channel:
        await tg.wait_for("getUpdates", count=4)
        assert channel.health().state == "reconnecting"
        assert logged(caplog, "409 Conflict: another process is polling this bot token") == 1
        tg.set_conflict(False)
        tg.push_message(private_chat(ALICE), ALICE, "are you there?")
        await tg.wait_for("sendMessage")
        await until(lambda: channel.health().state == "running")
    assert logged(caplog, "polling recovered") == 1


async def test_malformed_updates_are_ignored_with_a_log_line(tg, caplog) -> None:
    tg.push_raw({"update_id": 50, "message": {"message_id": 1}})  # no date, no chat
    tg.push_raw({"update_id": 51, "message": "not an object"})
    good = tg.push({"message": tg.message(private_chat(ALICE), ALICE, "still here")})
    inbox = Inbox(echo)
    async with running(tg, inbox):
        await tg.wait_for("sendMessage")
        await tg.wait_for("getUpdates", where=lambda c: (c.params.get("offset") or 0) > good)
    assert [m.text for m in inbox.messages] == ["still here"]
    assert logged(caplog, "ignored malformed update 50") == 1
    assert logged(caplog, "ignored malformed update 51") == 1


async def test_a_rejected_token_stops_start_with_a_clear_error(tg) -> None:
    cfg = TelegramConfig(enabled=True, token="999:wrong-token", api_base_url=tg.root)
    channel = TelegramChannel(cfg, timings=FAST)
    with pytest.raises(TelegramStartError, match="refused the token") as err:
        await start_answering(channel, Inbox())
    assert "wrong-token" not in str(err.value)
    assert channel.health().state == "stopped"


def test_missing_token_and_webhook_url_are_config_errors() -> None:
    with pytest.raises(TelegramStartError, match="token is not set"):
        TelegramChannel(TelegramConfig(enabled=True))
    with pytest.raises(ValueError, match="webhook_url"):  # refused by the config itself
        TelegramChannel(TelegramConfig(enabled=True, token="1:x", mode="webhook"))


async def test_unreachable_api_at_start_is_retried_in_the_background(caplog) -> None:
    with socket.socket() as sock:  # a port nobody listens on (yet)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = TelegramConfig(
        enabled=True, token="1:x", api_base_url=f"http://127.0.0.1:{port}", poll_stall_s=1.0
    )
    channel = TelegramChannel(cfg, timings=FAST)
    await start_answering(channel, Inbox())
    try:
        assert channel.health().state == "reconnecting"
        await until(lambda: logged(caplog, "starting polling failed") >= 1)
    finally:
        await channel.stop()
    assert logged(caplog, "Bot API unreachable at start") == 1
    assert channel.health().state == "stopped"


async def test_webhook_mode_sets_the_webhook_and_checks_the_secret(tg) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/tg/hook"
    inbox = Inbox(echo)
    update = {"update_id": 7, "message": tg.message(private_chat(ALICE), ALICE, "via webhook")}
    async with running(
        tg,
        inbox,
        mode="webhook",
        webhook_url=url,
        webhook_listen="127.0.0.1",
        webhook_port=port,
        webhook_secret="s3cret-Token_1",
    ) as channel:
        (hook,) = tg.calls_of("setWebhook")
        assert hook.params["url"] == url and hook.params["secret_token"] == "s3cret-Token_1"
        assert tg.calls_of("getUpdates") == []
        async with aiohttp.ClientSession() as http:
            bad = await http.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"}
            )
            assert bad.status == 403
            good = await http.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret-Token_1"}
            )
            assert good.status == 200
        (sent,) = await tg.wait_for("sendMessage")
        assert channel.health().state == "running"
    assert [m.text for m in inbox.messages] == ["via webhook"]
    assert sent.params["text"] == "echo: via webhook"


async def test_health_reports_running_with_last_ok_then_stopped(tg) -> None:
    cfg = TelegramConfig(enabled=True, token=tg.token, api_base_url=tg.root)
    channel = TelegramChannel(cfg, timings=FAST)
    assert channel.health().state == "stopped"
    await start_answering(channel, Inbox(lambda m: Reply("x")))
    try:
        await until(lambda: channel.health().last_ok is not None)
        assert channel.health().state == "running"
    finally:
        await channel.stop()
    assert channel.health().state == "stopped"
