"""Building and driving python-telegram-bot's Application for the channel.

Why separate: this is the part that knows PTB's lifecycle (two request objects, the
Updater's polling/webhook start, a stop that can hang on a dead connection); the channel
itself only decides what to do with messages.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from telegram import Update
from telegram.error import TelegramError
from telegram.ext import Application, ApplicationBuilder, ContextTypes, TypeHandler
from telegram.request import HTTPXRequest

from channels.config import TelegramConfig
from channels.telegram.polling import PollingRequest, PollMonitor

log = logging.getLogger(__name__)

App = Application[Any, Any, Any, Any, Any, Any]
UpdateCallback = Callable[[object, ContextTypes.DEFAULT_TYPE], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class TelegramTimings:
    """Every wait the channel makes, so tests can run it fast and operators can tune it."""

    poll_timeout_s: float = 25.0  # long-poll length; capped at a third of poll_stall_s
    poll_interval_s: float = 0.0  # pause between polls (PTB backs off from here on errors)
    request_timeout_s: float = 10.0  # connect/read/write for every Bot API call
    watchdog_check_s: float = 5.0
    restart_backoff_s: float = 1.0
    restart_backoff_max_s: float = 300.0
    stop_updater_s: float = 5.0  # a hung poll is abandoned after this long at stop/restart
    stop_grace_s: float = 10.0  # replies in flight get this long to finish at stop
    send_attempts: int = 3
    send_backoff_s: float = 1.0
    max_retry_after_s: float = 60.0
    typing_interval_s: float = 4.0  # Telegram shows "typing" for 5 s
    image_timeout_s: float = 30.0
    group_sends_per_min: int = 20  # Telegram's per-group budget; edits count too
    ack_delay_s: float = 2.0  # [telegram] ack_reaction: react when no text shows by then
    draft_keepalive_s: float = 20.0  # a draft fades after 30 s unless shown again
    stream_abandon_s: float = 600.0  # a preview that hears nothing this long stops


def build_application(
    config: TelegramConfig,
    token: str,
    timings: TelegramTimings,
    monitor: PollMonitor,
    on_update: UpdateCallback,
) -> tuple[App, tuple[HTTPXRequest, ...]]:
    """The Application, pointed at `api_base_url`, and its request objects (to close)."""
    root = config.api_base_url.rstrip("/")
    timeout = timings.request_timeout_s
    request = HTTPXRequest(
        connection_pool_size=64,
        read_timeout=timeout,
        write_timeout=timeout,
        connect_timeout=timeout,
        pool_timeout=timeout,
    )
    poll_request = PollingRequest(
        monitor,
        connection_pool_size=2,
        read_timeout=timeout,
        write_timeout=timeout,
        connect_timeout=timeout,
        pool_timeout=timeout,
    )
    app = (
        ApplicationBuilder()
        .token(token)
        .base_url(f"{root}/bot")
        .base_file_url(f"{root}/file/bot")
        .request(request)
        .get_updates_request(poll_request)
        .build()
    )
    app.add_handler(TypeHandler(Update, on_update))
    return app, (request, poll_request)


async def start_receiving(app: App, config: TelegramConfig, timings: TelegramTimings) -> None:
    """Start the Updater: long polling, or a webhook server plus setWebhook."""
    assert app.updater is not None
    # callback_query: presses of our inline buttons (callbacks.py), none where no button
    # was sent; chat_member: joins, sent only to a group's admin bots (members.py).
    allowed = ["message", "edited_message"] if config.answer_edited else ["message"]
    allowed += ["callback_query", "chat_member"]
    if config.mode == "webhook":
        secret = (
            config.webhook_secret.get_secret_value()
            if config.webhook_secret is not None
            else secrets.token_urlsafe(32)  # always checked: nobody else can post updates
        )
        await app.updater.start_webhook(
            listen=config.webhook_listen,
            port=config.webhook_port,
            url_path=urlsplit(config.webhook_url or "").path.lstrip("/"),
            webhook_url=config.webhook_url,
            secret_token=secret,
            allowed_updates=allowed,
            bootstrap_retries=0,
        )
        return
    poll = min(timings.poll_timeout_s, config.poll_stall_s / 3)
    await app.updater.start_polling(
        poll_interval=timings.poll_interval_s,
        timeout=timedelta(seconds=int(poll) if poll >= 1 else poll),  # the API wants seconds
        bootstrap_retries=0,
        allowed_updates=allowed,
        error_callback=lambda exc: None,  # PollingRequest already logged it
    )


async def stop_updater(app: App | None, timeout_s: float, redact: Callable[[str], str]) -> None:
    """Stop polling/webhook within `timeout_s`: PTB's final getUpdates can hang on a stall."""
    updater = app.updater if app is not None else None
    if updater is None or not updater.running:
        return
    try:
        await asyncio.wait_for(updater.stop(), timeout_s)
    except TimeoutError:
        log.warning(
            "telegram: updater did not stop within %.1fs; its last poll is abandoned", timeout_s
        )
    except (TelegramError, RuntimeError) as exc:
        log.warning("telegram: stopping the updater failed (%s)", redact(str(exc)))
