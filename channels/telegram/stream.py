"""A Telegram reply shown while the model writes it (core.streaming.ReplyStream).

Private chats: the growing text is the chat's draft (sendMessageDraft, one draft id per
turn); the final reply is sent as a message, which replaces the draft. Groups and
topics: once there is a sentence or so, the text goes out as a message that is then
edited as it grows. Either way, past 4,096 UTF-16 units the text continues in a new
message; the finished parts are real messages, recorded so a crash cannot duplicate them.

Pacing: at most one Bot API call per `interval_s`, and in groups only while the chat's
budget (pacing.py) keeps `SPARE_SLOTS` free for the final answer. The preview is shown as
plain text (rendered, without entities: a preview can never be refused for its
formatting); the final reply carries the formatting. A preview that fails is only a
preview: errors are logged and the stream carries on or stops previewing; `finish`
delivers the reply whatever happened to the preview.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from telegram.error import BadRequest, Forbidden, InvalidToken, RetryAfter, TelegramError

from channels.formatting.growing import close_open_marks
from channels.formatting.markdown import new_parser
from channels.formatting.telegram import FormattedText, render_telegram
from channels.formatting.telegram_split import split_formatted
from channels.telegram.completion import Shown, Target, complete, final_pieces, record_of
from channels.telegram.outbound import MessageGone, TelegramSender
from channels.telegram.presence import Presence
from core.messages import DeliveryError, Sent
from core.streaming import StreamRecorder

log = logging.getLogger(__name__)

SPARE_SLOTS = 3  # of a group's per-minute budget, left for the final answer and others
FIRST_MESSAGE_MIN_CHARS = 12  # a group preview starts at a sentence end past this many
FIRST_MESSAGE_CHARS = 120  # ... or at this many characters without one
_SENTENCE_END = re.compile(r"[.!?…](?:\s|$)|[。！？]|\n")


@dataclass(frozen=True)
class StreamSettings:
    interval_s: float = 1.0  # [telegram] stream_interval_s
    keepalive_s: float = 20.0  # a draft fades after 30 s unless shown again
    abandon_s: float = 600.0  # a stream that hears nothing for this long stops its worker


def worth_a_message(text: str) -> bool:
    """Whether a group preview has enough to start a message: a sentence or so."""
    visible = text.strip()
    if len(visible) >= FIRST_MESSAGE_CHARS:
        return True
    found = _SENTENCE_END.search(visible, FIRST_MESSAGE_MIN_CHARS - 1)
    return len(visible) >= FIRST_MESSAGE_MIN_CHARS and found is not None


class TelegramStream:
    """One reply being shown as it grows; see the module docstring."""

    def __init__(
        self,
        sender: TelegramSender,
        target: Target,
        *,
        record: StreamRecorder,
        presence: Presence,
        settings: StreamSettings,
        draft_id: int | None,
        shown: list[Shown],
        redact: Callable[[str], str],
    ) -> None:
        """`draft_id` None: preview in messages (groups); `shown`: messages an earlier
        attempt of this reply recorded, continued instead of sending new ones."""
        self._sender = sender
        self._target = target
        self._record_fn = record
        self._presence = presence
        self._settings = settings
        self._draft_id = draft_id
        self._shown = list(shown)
        self._redact = redact
        self._parser = new_parser()
        self._latest: str | None = None
        self._draft_shown: FormattedText | None = None
        self._changed = asyncio.Event()
        self._lock = asyncio.Lock()
        self._worker: asyncio.Task[None] | None = None
        self._next_at = 0.0
        self._closed = False
        self._previewing = True
        self._keepalives = 0

    # -- ReplyStream -----------------------------------------------------------------

    async def show(self, text: str) -> None:
        """Hand over the latest preview; the worker shows it when pacing allows."""
        if self._closed or not self._previewing:
            return
        self._latest = text
        self._changed.set()
        if self._worker is None or self._worker.done():  # done: it idled out, start again
            self._worker = asyncio.create_task(self._run())

    async def finish(self, text: str) -> Sent:
        """Deliver `text` as the final, formatted reply in the preview's messages."""
        await self.close()
        try:
            ids = await complete(
                self._sender, self._target, final_pieces(text), self._shown, self._now_shown
            )
        except TelegramError as exc:
            raise DeliveryError(f"telegram: {self._redact(str(exc))}") from None
        finally:
            self._presence.ended(self._target.key)
        self._shown = [Shown(message_id) for message_id in ids]
        return Sent(tuple(str(message_id) for message_id in ids))

    @property
    def showing(self) -> bool:
        """A preview message is out (a private chat's draft is no message: it fades)."""
        return bool(self._shown)

    async def close(self) -> None:
        """Stop previewing; a call in flight completes first (so its result is known)."""
        self._closed = True
        async with self._lock:
            pass  # a call in flight completes first; the worker sees _closed after it
        worker = self._worker
        if worker is not None and not worker.done():
            worker.cancel()  # never awaited under the lock: a worker that missed its
            await asyncio.wait({worker})  # cancel may still want it, then sees _closed

    # -- the worker ------------------------------------------------------------------

    async def _run(self) -> None:
        clock = self._sender.pacer.clock
        try:
            while not self._closed:
                try:
                    await asyncio.wait_for(self._changed.wait(), self._idle_s())
                except TimeoutError:
                    if self._draft_shown is None:
                        return  # nothing shown and nothing new for a long time: abandoned
                    self._draft_shown = None  # show the draft again before it fades
                    self._keepalives += 1
                    if self._keepalives * self._settings.keepalive_s > self._settings.abandon_s:
                        return
                else:
                    self._keepalives = 0
                self._changed.clear()
                wait = self._next_at - clock.monotonic()
                if wait > 0:
                    await clock.sleep(wait)
                async with self._lock:
                    if self._closed:
                        return
                    again = await self._step()
                self._next_at = clock.monotonic() + max(self._settings.interval_s, again or 0.0)
                if again is not None:
                    self._changed.set()
        except Exception:
            log.exception("telegram: preview in chat %s stopped", self._target.chat_id)

    def _idle_s(self) -> float:
        if self._draft_id is not None and self._draft_shown is not None:
            return self._settings.keepalive_s
        return self._settings.abandon_s

    async def _step(self) -> float | None:
        """One Bot API call towards showing the latest preview. None: it is shown (or
        cannot be); else seconds to wait before the next step (0: the usual interval)."""
        if self._latest is None or not self._previewing:
            return None
        growing = close_open_marks(self._latest)  # no literal `**` while it grows
        plain = FormattedText(render_telegram(growing, self._parser).text)
        pieces = split_formatted(plain)
        if not pieces:
            return None
        drafting = self._draft_id is not None
        in_messages = pieces[:-1] if drafting else pieces
        if not self._shown and not drafting and not worth_a_message(plain.text):
            return None
        for index, piece in enumerate(in_messages):
            if index >= len(self._shown) or self._shown[index].piece != piece:
                return await self._put(index, piece)
        if drafting and pieces[-1] != self._draft_shown:
            return await self._draft(pieces[-1])
        return None

    async def _put(self, index: int, piece: FormattedText) -> float | None:
        """Send or edit message `index` of the preview to show `piece`."""
        chat = self._target.chat_id
        wait = self._sender.pacer.wait_s(chat, spare=SPARE_SLOTS)
        if wait > 0:
            return wait
        try:
            if index < len(self._shown):
                message_id = self._shown[index].message_id
                await self._sender.edit_piece(chat, message_id, piece, once=True)
                self._shown[index] = Shown(message_id, piece)
            else:
                message_id = await self._sender.send_piece(
                    chat,
                    piece,
                    reply_to=self._target.reply_to if index == 0 else None,
                    thread_id=self._target.thread_id,
                    once=True,
                )
                self._shown.append(Shown(message_id, piece))
                await self._record(self._shown)
        except RetryAfter:
            return 0.0  # the chat is held (pacing.py); the next step waits for it
        except (MessageGone, BadRequest, Forbidden) as exc:
            self._stop_preview(exc)
            return None
        except TelegramError as exc:
            log.debug("telegram: preview in chat %s failed, trying again: %s", chat, exc)
            return 0.0
        self._presence.shown(self._target.key)
        return 0.0

    async def _draft(self, piece: FormattedText) -> float | None:
        assert self._draft_id is not None
        chat = self._target.chat_id
        wait = self._sender.pacer.wait_s(chat)  # private chats: only a 429 holds them
        if wait > 0:
            return wait
        try:
            await self._sender.draft(chat, self._draft_id, piece, self._target.thread_id)
        except RetryAfter:
            return 0.0
        except (BadRequest, Forbidden, InvalidToken) as exc:  # 404: a server without drafts
            log.info("telegram: no drafts in chat %s (%s); previewing in a message", chat, exc)
            self._draft_id = None
            return 0.0
        except TelegramError as exc:
            log.debug("telegram: draft in chat %s failed, trying again: %s", chat, exc)
            return 0.0
        self._draft_shown = piece
        self._presence.shown(self._target.key)
        return None

    def _stop_preview(self, exc: Exception) -> None:
        log.info(
            "telegram: preview in chat %s stopped (%s); the reply will be sent when done",
            self._target.chat_id,
            self._redact(str(exc)),
        )
        self._previewing = False

    async def _now_shown(self, shown: list[Shown]) -> None:
        self._shown = list(shown)
        await self._record(shown)

    async def _record(self, shown: list[Shown]) -> None:
        try:
            await self._record_fn(record_of(shown))
        except Exception:  # a preview must not fail the turn; recovery may then duplicate
            log.exception("telegram: could not record the preview in chat %s", self._target.chat_id)
