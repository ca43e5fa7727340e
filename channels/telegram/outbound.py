"""Sending to Telegram: paced per chat, 429s honoured, formatting that cannot lose a reply.

Why entities and not parse_mode: the model's output is full of `*`, `_` and `<` that the
Markdown/HTML parse modes reject ("can't parse entities"), which would lose the whole
reply. Replies are rendered to text + entities (channels/formatting/telegram.py); if
Telegram still refuses them, the same text goes out plain. Why our own retry:
python-telegram-bot raises RetryAfter and leaves waiting to the caller, and a 429 holds
the whole chat (see pacing.py), not just the request that got it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from telegram import (
    Bot,
    InlineKeyboardMarkup,
    InputFile,
    MessageEntity,
    ReplyParameters,
    User,
)
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from channels.formatting.split import split_text
from channels.formatting.telegram import Entity, FormattedText, utf16_length
from channels.telegram.app import TelegramTimings
from channels.telegram.pacing import ChatPacer
from core.messages import OutboundMessage

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 4096  # Telegram counts UTF-16 code units

T = TypeVar("T")
EntitiesCall = Callable[[list[MessageEntity] | None], Awaitable[T]]


class MessageGone(Exception):
    """The message to edit no longer exists (deleted) or can no longer be edited."""


def split_for_telegram(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Pieces that fit Telegram's limit, counted in UTF-16 units (an emoji is two)."""
    pieces: list[str] = []
    for piece in split_text(text, limit):
        if _utf16_len(piece) <= limit:
            pieces.append(piece)
        else:  # at most two units per code point, so half the limit always fits
            pieces.extend(split_text(piece, limit // 2))
    return pieces


def with_mention(piece: FormattedText, user_id: str) -> FormattedText:
    """`piece` with its first word (a reminder's ⏰) as a text_mention of `user_id`, so
    Telegram notifies that person of a message nobody in the group asked for just now."""
    if not user_id.lstrip("-").isdigit() or not piece.text.strip():
        return piece
    word = piece.text.split(maxsplit=1)[0]
    start = piece.text.index(word)
    mention = Entity(
        "text_mention", utf16_length(piece.text[:start]), utf16_length(word), user_id=int(user_id)
    )
    if any(entity.offset < mention.end for entity in piece.entities):
        return piece  # the first word is formatted already: leave it as it is
    return FormattedText(piece.text, (mention, *piece.entities))


def _bot_api_entity(data: dict[str, Any]) -> MessageEntity:
    user = data.pop("user", None)
    return MessageEntity(**data, user=User(**user) if user is not None else None)


def retry_after_seconds(exc: RetryAfter) -> float:
    """RetryAfter.retry_after is int or timedelta depending on PTB_TIMEDELTA; take both."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def not_modified(exc: TelegramError) -> bool:
    """An edit to the text the message already has: nothing to do, not a failure."""
    return "message is not modified" in exc.message.lower()


def gone(exc: TelegramError) -> bool:
    text = exc.message.lower()
    return any(
        phrase in text
        for phrase in ("message to edit not found", "message can't be edited", "message not found")
    )


class TelegramSender:
    """Sends, edits and drafts in a chat with bounded retries, paced by a ChatPacer;
    raises what it could not recover from."""

    def __init__(self, bot: Bot, pacer: ChatPacer, timings: TelegramTimings) -> None:
        if timings.send_attempts < 1:
            raise ValueError("send_attempts must be >= 1")
        self._bot = bot
        self.pacer = pacer
        self._attempts = timings.send_attempts
        self._max_retry_after_s = timings.max_retry_after_s
        self._backoff_s = timings.send_backoff_s

    async def send_text(
        self,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
        markup: InlineKeyboardMarkup | None = None,
    ) -> list[int]:
        """Send plain `text` in as many messages as needed; the first replies to `reply_to`,
        the last carries `markup` (inline buttons).

        For our own texts (command answers, notices), shown exactly as written. Returns
        the sent message ids. Raises TelegramError if a piece cannot be sent; the pieces
        before it stay sent (Telegram has no transactions).
        """
        sent: list[int] = []
        pieces = split_for_telegram(text)
        for index, piece in enumerate(pieces):
            formatted = FormattedText(piece)
            sent.append(
                await self.send_piece(
                    chat_id,
                    formatted,
                    reply_to=reply_to if index == 0 else None,
                    thread_id=thread_id,
                    markup=markup if index == len(pieces) - 1 else None,
                )
            )
        return sent

    async def send_piece(
        self,
        chat_id: int,
        piece: FormattedText,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
        once: bool = False,
        markup: InlineKeyboardMarkup | None = None,
    ) -> int:
        """Send one piece (within the limit) with its entities, plain if they are refused.

        `once`: a single paced attempt (a preview: a 429 holds the chat and is raised).
        """
        reply = (
            ReplyParameters(reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )

        async def call(entities: list[MessageEntity] | None) -> int:
            message = await self._bot.send_message(
                chat_id,
                piece.text,
                message_thread_id=thread_id,
                reply_parameters=reply,
                entities=entities,
                reply_markup=markup,
            )
            return message.message_id

        return await self._formatted(chat_id, piece, call, once=once)

    async def edit_piece(
        self, chat_id: int, message_id: int, piece: FormattedText, *, once: bool = False
    ) -> None:
        """Make message `message_id` show `piece`; MessageGone when it no longer can."""

        async def call(entities: list[MessageEntity] | None) -> None:
            await self._bot.edit_message_text(
                piece.text, chat_id=chat_id, message_id=message_id, entities=entities
            )

        try:
            await self._formatted(chat_id, piece, call, once=once)
        except BadRequest as exc:
            if not_modified(exc):
                return
            if gone(exc):
                raise MessageGone(str(exc)) from None
            raise

    async def draft(
        self, chat_id: int, draft_id: int, piece: FormattedText, thread_id: int | None
    ) -> None:
        """Show `piece` as the chat's draft `draft_id` (private chats; one attempt)."""

        async def call(entities: list[MessageEntity] | None) -> None:
            await self._bot.send_message_draft(
                chat_id, draft_id, piece.text, message_thread_id=thread_id, entities=entities
            )

        await self._formatted(chat_id, piece, call, once=True, paced=False)

    async def send_voice(self, chat_id: int, audio: bytes, thread_id: int | None = None) -> int:
        """One voice message (OGG/Opus bytes), paced and retried like a text piece."""

        async def call() -> int:
            sent = await self._bot.send_voice(
                chat_id, InputFile(audio, filename="reply.ogg"), message_thread_id=thread_id
            )
            return sent.message_id

        return await self._request(chat_id, call, False, True)

    async def send_photo(
        self,
        chat_id: int,
        image: bytes,
        caption: str,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
    ) -> int:
        """One photo with a plain caption (a drawn picture and its prompt), paced and
        retried like a text piece."""
        reply = (
            ReplyParameters(reply_to, allow_sending_without_reply=True)
            if reply_to is not None
            else None
        )

        async def call() -> int:
            sent = await self._bot.send_photo(
                chat_id,
                InputFile(image, filename="picture.png"),
                caption=caption[:1024] or None,
                message_thread_id=thread_id,
                reply_parameters=reply,
            )
            return sent.message_id

        return await self._request(chat_id, call, False, True)

    async def send_attached(
        self,
        message: OutboundMessage,
        chat_id: int,
        *,
        reply_to: int | None = None,
        thread_id: int | None = None,
    ) -> int | None:
        """The picture (its caption the text) or the file `message` carries, sent; None
        when it carries neither."""
        if message.image is not None:
            image, text = message.image, message.text
            return await self.send_photo(
                chat_id, image, text, reply_to=reply_to, thread_id=thread_id
            )
        if message.document is not None:
            name = message.document_name or "file"
            return await self.send_document(chat_id, message.document, name, thread_id=thread_id)
        return None

    async def send_document(
        self, chat_id: int, data: bytes, name: str, *, thread_id: int | None = None
    ) -> int:
        """One file (a sandbox run's output) under its name, paced and retried like a
        text piece."""

        async def call() -> int:
            sent = await self._bot.send_document(
                chat_id, InputFile(data, filename=name), message_thread_id=thread_id
            )
            return sent.message_id

        return await self._request(chat_id, call, False, True)

    async def delete(self, chat_id: int, message_id: int) -> bool:
        """Delete one of our messages; failures are only logged (False)."""
        try:
            await self._bot.delete_message(chat_id, message_id)
            return True
        except TelegramError as exc:
            log.warning(
                "telegram: could not delete message %s in chat %s: %s", message_id, chat_id, exc
            )
            return False

    async def react(self, chat_id: int, message_id: int, emoji: str | None) -> bool:
        """Set (or with None, remove) our reaction on a message; failures only logged."""
        try:
            await self._bot.set_message_reaction(
                chat_id, message_id, reaction=[emoji] if emoji else []
            )
            return True
        except TelegramError as exc:
            log.info(
                "telegram: reaction on message %s in chat %s failed: %s", message_id, chat_id, exc
            )
            return False

    async def _formatted(
        self,
        chat_id: int,
        piece: FormattedText,
        call: EntitiesCall[T],
        *,
        once: bool,
        paced: bool = True,
    ) -> T:
        """`call` with the piece's entities; if Telegram refuses the request and there
        were entities, the same text once more without them."""
        entities = [_bot_api_entity(entity.to_bot_api()) for entity in piece.entities]
        try:
            return await self._request(chat_id, lambda: call(entities or None), once, paced)
        except BadRequest as exc:
            if not entities or not_modified(exc) or gone(exc):
                raise
            log.info(
                "telegram: chat %s refused the formatting (%s); sending it plain", chat_id, exc
            )
        return await self._request(chat_id, lambda: call(None), once, paced)

    async def _request(
        self, chat_id: int, call: Callable[[], Awaitable[T]], once: bool, paced: bool
    ) -> T:
        for attempt in range(1, self._attempts + 1):
            if paced:
                await self.pacer.acquire(chat_id)
            try:
                return await call()
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                self.pacer.hold(chat_id, wait)
                if once or attempt == self._attempts or wait > self._max_retry_after_s:
                    raise
                log.info("telegram: flood control in chat %s, waiting %.1fs", chat_id, wait)
                if not paced:  # a paced retry waits for the hold in acquire()
                    await self.pacer.clock.sleep(wait)
            except (BadRequest, Forbidden):
                raise  # the request itself is refused: retrying cannot help
            except NetworkError as exc:
                if once or attempt == self._attempts:
                    raise
                log.info("telegram: request to chat %s failed (%s), retrying", chat_id, exc)
                await self.pacer.clock.sleep(self._backoff_s * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def typing(
        self,
        chat_id: int,
        thread_id: int | None,
        *,
        delay_s: float,
        interval_s: float,
        quiet: Callable[[], bool] | None = None,
    ) -> AsyncIterator[None]:
        """Show "typing..." while the body runs (after `delay_s`, renewed every
        `interval_s`), except while `quiet()` says the reply's text is already showing."""
        task = asyncio.create_task(
            self._typing_loop(chat_id, thread_id, delay_s, interval_s, quiet)
        )
        try:
            yield
        finally:
            task.cancel()
            await asyncio.wait({task})  # unlike `await task`, never eats our own cancel
            if not task.cancelled() and task.exception() is not None:
                log.debug("telegram: typing indicator stopped: %r", task.exception())

    async def _typing_loop(
        self,
        chat_id: int,
        thread_id: int | None,
        delay_s: float,
        interval_s: float,
        quiet: Callable[[], bool] | None,
    ) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        while True:
            if quiet is None or not quiet():
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
