"""Inline buttons: `OutboundMessage.choices` shown as an inline keyboard, and a press (a
`callback_query` update) turned into the command its button names, sent by the person who
pressed it.

Why a press is a command and nothing more: the gate and the command table then decide it
exactly as if the presser had typed it (the one admin decision, the action recorded before
it is taken), so a button can never do what its presser could not. A press is answered in
the button's own toast; only an answer that settles the message's choices (a proposal
decided) is also said in the chat, and the buttons come off that message.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable

from cachetools import TTLCache
from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.error import BadRequest, TelegramError

from channels.telegram.completion import Target
from channels.telegram.inbound import PLATFORM, BotIdentity, telegram_message_id
from channels.telegram.outbound import TelegramSender
from core.inject import clean_name
from core.messages import ChatType, InboundMessage, OutboundMessage, Sent

log = logging.getLogger(__name__)

MAX_DATA_BYTES = 64  # Telegram's limit on callback_data
MAX_TOAST = 200  # Telegram's limit on answerCallbackQuery's text
PRESS_TTL_S = 900.0  # a press nobody answered by then is forgotten
STALE = "That button does nothing now."
# A command of plain words, as the buttons we make carry it ("mod:approve:7"): any other
# data (an old button, a forged one) is refused without reaching the command table.
_DATA = re.compile(r"^[a-z]{1,32}(?::[A-Za-z0-9_#-]{1,32}){0,4}$")
_REQUEST = "tgpress:"


def data_of(command: str) -> str | None:
    """The callback_data for a command text ("/mod approve 7" -> "mod:approve:7"); None
    when it cannot be one (too long, not plain words)."""
    data = ":".join(command.strip().removeprefix("/").split())
    return data if _DATA.match(data) and len(data.encode()) <= MAX_DATA_BYTES else None


def command_of(data: str) -> str | None:
    return "/" + " ".join(data.split(":")) if _DATA.match(data) else None


def keyboard(choices: tuple[tuple[str, str], ...]) -> InlineKeyboardMarkup | None:
    """One row of buttons; a choice whose command cannot be a button is left out (the
    message's text names the commands anyway)."""
    row = [
        InlineKeyboardButton(label[:64], callback_data=data)
        for label, command in choices
        if (data := data_of(command)) is not None
    ]
    return InlineKeyboardMarkup([row]) if row else None


class Presses:
    """Presses in, their answers out: a press waits here (under its request id) until the
    core answers it through `send`."""

    def __init__(
        self,
        bot: Bot,
        sender: TelegramSender,
        handle: Callable[[InboundMessage], Awaitable[None]],
        redact: Callable[[str], str],
    ) -> None:
        self._bot = bot
        self._sender = sender
        self._handle = handle
        self._redact = redact
        self._waiting: TTLCache[str, str] = TTLCache(4096, PRESS_TTL_S)  # request -> query

    async def take(self, update: Update, me: BotIdentity) -> None:
        """A callback_query: the command its button names, as the presser's message."""
        query = update.callback_query
        if query is None:
            return
        message = self._inbound(query, me)
        if message is None:
            await self._toast(query.id, STALE)
            return
        assert message.request_id is not None
        self._waiting[message.request_id] = query.id
        await self._handle(message)

    def answers(self, message: OutboundMessage) -> bool:
        """This outbound message answers a press, or settles a message's buttons."""
        return message.settles is not None or (message.request_id or "") in self._waiting

    async def answer(self, message: OutboundMessage, target: Target) -> Sent:
        """The press's toast; when the answer settles the choices, the buttons come off
        and the answer is said in the chat too (everyone sees what was decided)."""
        query_id = self._waiting.pop(message.request_id or "", None)
        if query_id is not None:
            await self._toast(query_id, message.text)
        if message.settles is None:
            return Sent()
        try:
            await self._bot.edit_message_reply_markup(
                target.chat_id, telegram_message_id(message.settles), reply_markup=None
            )
        except BadRequest as exc:  # not modified (gone already), or the message is gone
            log.debug("telegram: buttons not removed: %s", self._redact(str(exc)))
        ids = await self._sender.send_text(
            target.chat_id, message.text, reply_to=target.reply_to, thread_id=target.thread_id
        )
        return Sent(tuple(str(i) for i in ids))

    async def _toast(self, query_id: str, text: str) -> None:
        try:
            await self._bot.answer_callback_query(query_id, text=_short(text))
        except TelegramError as exc:  # too late (the query expired): the chat line stays
            log.info("telegram: press not answered: %s", self._redact(str(exc)))

    def _inbound(self, query: CallbackQuery, me: BotIdentity) -> InboundMessage | None:
        shown = query.message
        command = command_of(query.data or "")
        if command is None or shown is None or shown.chat.type == "channel":
            return None
        group = shown.chat.type in ("group", "supergroup")
        who = query.from_user
        name = clean_name(who.full_name) or clean_name(who.username or "") or str(who.id)
        full = shown if isinstance(shown, Message) else None  # else too old to be shown
        topic = full is not None and full.is_topic_message and full.message_thread_id
        text = full.text or "" if full is not None else ""
        return InboundMessage(
            platform=PLATFORM,
            chat_id=str(shown.chat.id),
            chat_type=ChatType.GROUP if group else ChatType.PRIVATE,
            sender_id=str(who.id),
            sender_name=name,
            text=command,
            # Unique per press (a second press is a second command), quoting the message
            # the buttons are on.
            message_id=f"{shown.message_id}:press:{query.id}",
            thread_id=str(full.message_thread_id) if full is not None and topic else None,
            reply_to_bot=True,
            reply_to_message_id=str(shown.message_id),
            reply_to_sender_id=str(me.id),
            reply_text=text,
            request_id=f"{_REQUEST}{uuid.uuid4().hex}",
        )


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TOAST else line[: MAX_TOAST - 1] + "…"
