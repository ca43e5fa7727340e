"""Sending to Telegram: split to the limit, plain text, 429s honoured, typing shown.

Why plain text: model output is full of `*`, `_` and `<` that Markdown/HTML parse modes
reject ("can't parse entities"), which would lose the whole reply. Why our own retry:
python-telegram-bot raises RetryAfter and leaves waiting to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import warnings
from collections.abc import AsyncIterator

from telegram import Bot, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from channels.formatting.split import split_text

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096  # Telegram counts UTF-16 code units


def split_for_telegram(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Pieces that fit Telegram's limit, counted in UTF-16 units (an emoji is two)."""
    pieces: list[str] = []
    for piece in split_text(text, limit):
        if _utf16_len(piece) <= limit:
            pieces.append(piece)
        else:  # at most two units per code point, so half the limit always fits
            pieces.extend(split_text(piece, limit // 2))
    return pieces


def retry_after_seconds(exc: RetryAfter) -> float:
    """RetryAfter.retry_after is int or timedelta depending on PTB_TIMEDELTA; take both."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


class TelegramSender:
    """Sends text to a chat with bounded retries; raises what it could not recover from."""

    def __init__(
        self,
        bot: Bot,
        *,
        attempts: int = 3,
        max_retry_after_s: float = 60.0,
        backoff_s: float = 1.0,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self._bot = bot
        self._attempts = attempts
        self._max_retry_after_s = max_retry_after_s
        self._backoff_s = backoff_s

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
    ) -> list[int]:
        """Send `text` in as many messages as needed; the first one replies to `reply_to`.

        Returns the sent message ids. Raises TelegramError if a piece cannot be sent; the
        pieces before it stay sent (Telegram has no transactions).
        """
        sent: list[int] = []
        for index, piece in enumerate(split_for_telegram(text)):
            message_id = await self._send_piece(
                chat_id, piece, reply_to if index == 0 else None, thread_id
            )
            sent.append(message_id)
        return sent

    async def _send_piece(
        self, chat_id: int, text: str, reply_to: int | None, thread_id: int | None
    ) -> int:
        reply = (
            ReplyParameters(reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )
        for attempt in range(1, self._attempts + 1):
            try:
                message = await self._bot.send_message(
                    chat_id, text, message_thread_id=thread_id, reply_parameters=reply
                )
                return message.message_id
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                if attempt == self._attempts or wait > self._max_retry_after_s:
                    raise
                log.info("telegram: flood control in chat %s, waiting %.1fs", chat_id, wait)
                await asyncio.sleep(wait)
            except (BadRequest, Forbidden):
                raise  # the request itself is refused: retrying cannot help
            except NetworkError as exc:
                if attempt == self._attempts:
                    raise
                log.info("telegram: send to chat %s failed (%s), retrying", chat_id, exc)
                await asyncio.sleep(self._backoff_s * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def typing(
        self, chat_id: int, thread_id: int | None, *, delay_s: float, interval_s: float
    ) -> AsyncIterator[None]:
        """Show "typing..." while the body runs (after `delay_s`, renewed every `interval_s`)."""
        task = asyncio.create_task(self._typing_loop(chat_id, thread_id, delay_s, interval_s))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.wait({task})  # unlike `await task`, never eats our own cancel
            if not task.cancelled() and task.exception() is not None:
                log.debug("telegram: typing indicator stopped: %r", task.exception())

    async def _typing_loop(
        self, chat_id: int, thread_id: int | None, delay_s: float, interval_s: float
    ) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        while True:
            try:
                await self._bot.send_chat_action(
                    chat_id, ChatAction.TYPING, message_thread_id=thread_id
                )
            except Forbidden:
                return
            except TelegramError as exc:  # cosmetic: never worth failing a reply over
                log.debug("telegram: typing indicator in chat %s failed: %s", chat_id, exc)
            await asyncio.sleep(interval_s)


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2
