"""Bringing a chat to show a final reply, reusing the messages a preview already put there.

Why one routine for three callers (the end of a stream, an ordinary send, recovery of a
stream that died): each has the reply's pieces and maybe some messages that already
show part of it. Piece i goes into message i (an edit, skipped when it already shows
exactly that), pieces beyond the messages are sent new, messages beyond the pieces are
deleted. So no part is ever sent twice, and a crash between two steps leaves the record
(`record_of`) that lets the next attempt pick up where this one stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from channels.formatting.telegram import FormattedText, render_telegram
from channels.formatting.telegram_split import split_formatted
from channels.telegram.inbound import telegram_message_id
from channels.telegram.outbound import MessageGone, TelegramSender
from core.messages import OutboundMessage

log = logging.getLogger(__name__)

RECORD_KEY = "stream"


@dataclass(frozen=True)
class Target:
    """Where a reply goes: the chat, its forum topic, the message the first piece quotes."""

    chat_id: int
    thread_id: int | None = None
    reply_to: int | None = None

    @property
    def key(self) -> tuple[int, int | None]:
        return (self.chat_id, self.thread_id)


@dataclass(frozen=True)
class Shown:
    """One of our messages showing a piece of the reply; `piece` None when what it
    shows is unknown (recorded by an attempt that died)."""

    message_id: int
    piece: FormattedText | None = None


def target_of(message: OutboundMessage) -> Target:
    """Where the core's reply goes (its ids are the strings the channel handed over)."""
    reply_to = (
        telegram_message_id(message.reply_to_message_id) if message.reply_to_message_id else None
    )
    thread = int(message.thread_id) if message.thread_id else None
    return Target(int(message.chat_id), thread, reply_to)


OnChange = Callable[[list[Shown]], Awaitable[None]]


def record_of(shown: Sequence[Shown]) -> dict[str, Any]:
    """What the core stores on the turn while messages show the reply: their ids, in order."""
    return {RECORD_KEY: {"message_ids": [item.message_id for item in shown]}}


def recorded(resume: dict[str, Any] | None) -> list[Shown]:
    """The messages an earlier attempt recorded (see `record_of`); [] for anything else."""
    entry = resume.get(RECORD_KEY) if isinstance(resume, dict) else None
    ids = entry.get("message_ids") if isinstance(entry, dict) else None
    if not isinstance(ids, list):
        return []
    shown = []
    for value in ids:
        try:
            shown.append(Shown(int(value)))
        except (TypeError, ValueError):
            log.warning("telegram: ignoring a malformed recorded message id %r", value)
    return shown


def final_pieces(markdown: str) -> list[FormattedText]:
    """The reply as Telegram messages: rendered Markdown cut to the message limit."""
    return split_formatted(render_telegram(markdown))


async def complete(
    sender: TelegramSender,
    target: Target,
    pieces: Sequence[FormattedText],
    shown: Sequence[Shown],
    on_change: OnChange | None = None,
) -> list[int]:
    """Make the chat show `pieces`, in order, in `shown` and as many new messages as
    needed; returns the ids of the messages that show the reply. `on_change` is called
    with every message showing the reply (kept and still to be reused) each time a new
    one was sent. Raises TelegramError when Telegram refused or could not be reached;
    what was done before stays done.
    """
    kept: list[Shown] = []
    reusable = list(shown)
    for index, piece in enumerate(pieces):
        if reusable:
            current = reusable.pop(0)
            if current.piece == piece:
                kept.append(current)
                continue
            try:
                await sender.edit_piece(target.chat_id, current.message_id, piece)
                kept.append(Shown(current.message_id, piece))
                continue
            except MessageGone:
                # a piece sent anew lands after the later messages: drop them so the
                # reply still reads in order, and send the rest anew
                log.info(
                    "telegram: message %s in chat %s is gone; sending the rest of the reply anew",
                    current.message_id,
                    target.chat_id,
                )
                await _delete(sender, target, reusable)
                reusable = []
        message_id = await sender.send_piece(
            target.chat_id,
            piece,
            reply_to=target.reply_to if index == 0 else None,
            thread_id=target.thread_id,
        )
        kept.append(Shown(message_id, piece))
        if on_change is not None:
            await on_change(kept + reusable)
    await _delete(sender, target, reusable)  # the preview ran longer than the reply
    return [item.message_id for item in kept]


async def _delete(sender: TelegramSender, target: Target, surplus: Sequence[Shown]) -> None:
    for item in surplus:
        await sender.delete(target.chat_id, item.message_id)
