"""The Telegram channel: python-telegram-bot's Application, polling or webhook.

Every message goes to the daemon's handler, which decides what is answered. Answers come
back through `send` (Markdown as entities, split to Telegram's limit, threaded in groups;
our own texts plain) or grow in place through `open_stream` (stream.py). A supervisor
(polling.py) recovers a silent poll stall or a 409 Conflict, and health() reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import random
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from telegram import BotCommand, Update
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, TelegramError
from telegram.ext import ContextTypes
from telegram.request import HTTPXRequest

from channels.base import ChannelHealth, MessageHandler
from channels.config import TelegramConfig, reaction_emoji
from channels.telegram.app import (
    App,
    TelegramTimings,
    build_application,
    start_receiving,
    stop_updater,
)
from channels.telegram.callbacks import Presses, keyboard
from channels.telegram.completion import complete, final_pieces, recorded, target_of
from channels.telegram.files import TelegramFiles
from channels.telegram.inbound import PLATFORM, BotIdentity, Skip, normalise, telegram_message_id
from channels.telegram.members import Members
from channels.telegram.outbound import TelegramSender, with_mention
from channels.telegram.pacing import ChatPacer, is_group
from channels.telegram.polling import PollMonitor, PollSupervisor
from channels.telegram.presence import AckReaction, Presence
from channels.telegram.replies import send_private
from channels.telegram.stream import StreamSettings, TelegramStream
from core.clock import Clock, SystemClock
from core.messages import (
    Attachment,
    ChatType,
    DeliveryError,
    ImageRef,
    InboundMessage,
    OutboundMessage,
    Sent,
    TryLater,
)
from core.moderation.platform import ActionFailed, PlatformAction
from core.streaming import StreamRecorder
from core.tasks import TaskTracker

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_COMMANDS", "TelegramChannel", "TelegramStartError"]

DEFAULT_COMMANDS: tuple[tuple[str, str], ...] = (
    ("help", "What I can do"),
    ("memory", "What I remember about you"),
    ("reset", "Clear our private chat's history"),
    ("context", "What my last answer was built from"),
)


class TelegramStartError(RuntimeError):
    """The channel cannot start (bad token, bad webhook settings); str() says why."""


class TelegramChannel:
    """Channel Protocol implementation for Telegram (see channels/base.py)."""

    name = PLATFORM
    pushes = True
    shows_images = True  # OutboundMessage.image goes out as a picture
    sends_files = True  # OutboundMessage.document goes out as a document

    def __init__(
        self,
        config: TelegramConfig,
        *,
        image_max_bytes: int = 10 * 1024 * 1024,
        commands: Sequence[tuple[str, str]] = DEFAULT_COMMANDS,
        timings: TelegramTimings | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`clock` paces sends (tests pass a virtual one). "typing…" is shown only
        while the daemon answers (`working`, called through core/turn/delivery.py from the
        dispatcher's one decision), never for a message it will not answer.
        """
        if config.token is None or not config.token.get_secret_value().strip():
            raise TelegramStartError(
                "telegram: [telegram] token is not set (get one from @BotFather)"
            )
        if config.mode == "webhook" and not config.webhook_url:
            raise TelegramStartError('telegram: mode = "webhook" needs webhook_url')
        # Opt in to PTB's future timedelta API; without it PTB warns on every 429 it parses.
        os.environ.setdefault("PTB_TIMEDELTA", "true")
        self._config = config
        self._token = config.token.get_secret_value().strip()
        self._image_max_bytes = image_max_bytes
        self._commands = tuple(commands)
        self._t = timings or TelegramTimings()
        self._monitor = PollMonitor(redact=self._redact)
        self._webhook = config.mode == "webhook"
        self._app: App | None = None
        self._handler: MessageHandler | None = None
        self._supervisor: PollSupervisor | None = None
        self._supervisor_task: asyncio.Task[None] | None = None
        self._tasks = TaskTracker("telegram")
        self._me: BotIdentity | None = None
        self._sender: TelegramSender | None = None
        self._members: Members | None = None
        self._presses: Presses | None = None
        self._files: TelegramFiles | None = None
        self._commands_set = False
        self._running = False
        self._requests: tuple[HTTPXRequest, ...] = ()
        self._clock = clock or SystemClock()
        self._presence = Presence(self._clock)
        self._ack: AckReaction | None = None
        self._streams: weakref.WeakSet[TelegramStream] = weakref.WeakSet()
        self._draft_ids = itertools.count(random.randrange(1, 1 << 30))

    # -- Channel protocol ------------------------------------------------------------

    async def start(self, handler: MessageHandler) -> None:
        if self._app is not None:
            raise RuntimeError("telegram channel already started")
        self._handler = handler
        self._app, self._requests = build_application(
            self._config, self._token, self._t, self._monitor, self._on_update
        )
        self._sender = TelegramSender(
            self._app.bot,
            ChatPacer(self._clock, per_minute=self._t.group_sends_per_min),
            self._t,
        )
        if self._config.ack_reaction:
            self._ack = AckReaction(
                self._sender,
                self._clock,
                self._presence,
                emoji=self._config.ack_reaction,
                delay_s=self._t.ack_delay_s,
            )
        self._members = Members(self._app.bot)
        self._presses = Presses(self._app.bot, self._sender, self._handle, self._redact)
        self._files = TelegramFiles(
            self._app.bot, max_bytes=self._image_max_bytes, timeout_s=self._t.image_timeout_s
        )
        self._running = True
        try:
            await self._bring_up()
            up = True
        except InvalidToken:
            await self._teardown()
            raise TelegramStartError(
                "telegram: the Bot API refused the token: set a valid [telegram] token "
                "(or TELEGRAM_BOT_TOKEN; get one from @BotFather)"
            ) from None
        except (OSError, TelegramError) as exc:
            if isinstance(exc, NetworkError) and not isinstance(exc, BadRequest):
                log.warning(
                    "telegram: Bot API unreachable at start (%s); retrying in the background",
                    self._redact(str(exc)),
                )
                up = False
            else:
                await self._teardown()
                raise TelegramStartError(
                    f"telegram: cannot start: {self._redact(str(exc))}"
                ) from None
        self._supervisor = PollSupervisor(
            monitor=self._monitor,
            start=self._bring_up,
            stop=self._stop_updater,
            stall_s=self._config.poll_stall_s,
            check_s=min(self._t.watchdog_check_s, self._config.poll_stall_s / 4),
            backoff_s=self._t.restart_backoff_s,
            backoff_max_s=self._t.restart_backoff_max_s,
            watch_stall=not self._webhook,
        )
        self._supervisor_task = asyncio.create_task(self._supervisor.run(up=up))

    async def stop(self) -> None:
        if self._app is None:
            return
        self._running = False
        if self._supervisor_task is not None:
            self._supervisor_task.cancel()
            await asyncio.wait({self._supervisor_task})
        await self._stop_updater()
        cancelled = await self._tasks.drain(self._t.stop_grace_s)
        for stream in list(self._streams):  # previews of turns that never finished
            await stream.close()
        if cancelled:
            log.warning("telegram: %d replies still running at stop were cancelled", cancelled)
        await self._teardown()

    async def send(self, message: OutboundMessage) -> Sent:
        """Deliver a reply the core sends, its Markdown rendered; DeliveryError when
        Telegram did not take it. With `message.resume` (a stream that died), the
        recorded messages are completed and only the missing parts sent."""
        if message.platform != PLATFORM:
            raise ValueError(f"telegram channel cannot send a {message.platform!r} message")
        if self._sender is None:
            raise DeliveryError("the telegram channel is not started")
        try:
            target = target_of(message)
        except ValueError:
            raise DeliveryError("telegram: not a chat id", permanent=True) from None
        try:
            if self._presses is not None and self._presses.answers(message):
                return await self._presses.answer(message, target)  # a button's press
            attached = await self._sender.send_attached(
                message, target.chat_id, reply_to=target.reply_to, thread_id=target.thread_id
            )
            if attached is not None:  # a drawn picture, a file a sandbox run made
                ids = [attached]
            elif message.private_to is not None:
                username = self._me.username if self._me else None
                ids = await send_private(self._sender, message, target, bot_username=username)
            elif message.plain:
                ids = await self._sender.send_text(
                    target.chat_id,
                    message.text,
                    reply_to=target.reply_to,
                    thread_id=target.thread_id,
                    markup=keyboard(message.choices),
                )
            else:
                pieces = final_pieces(message.text)
                if message.mention_user_id and is_group(target.chat_id) and pieces:
                    pieces = [with_mention(pieces[0], message.mention_user_id), *pieces[1:]]
                ids = await complete(self._sender, target, pieces, recorded(message.resume))
        except TelegramError as exc:
            # Blocked by the user, removed from the group, a chat that does not exist:
            # sending again on the next sweep would only fail again.
            never = isinstance(exc, Forbidden) or (
                isinstance(exc, BadRequest) and "chat not found" in str(exc).lower()
            )
            raise DeliveryError(f"telegram: {self._redact(str(exc))}", permanent=never) from None
        return Sent(tuple(str(i) for i in ids))

    async def react(self, message: OutboundMessage) -> bool:
        """A one-emoji answer as our reaction on the message it answers (optional Outlet
        method, core/turn/delivery.py). False when bots may not react with that emoji or
        Telegram refused it: the core then sends the emoji as a message."""
        if self._sender is None or not message.reaction or not message.react_to:
            return False
        allowed = reaction_emoji()
        emoji = next(
            (e for e in (message.reaction, message.reaction.strip("\ufe0f")) if e in allowed), None
        )
        if emoji is None:
            return False
        chat, target = int(message.chat_id), telegram_message_id(message.react_to)
        if not await self._sender.react(chat, target, emoji):
            return False
        if self._ack is not None:
            self._ack.answered(chat, target)  # our answer replaced the ack: keep it
        return True

    async def send_audio(self, message: OutboundMessage) -> Sent:
        """A spoken reply as a voice message (OGG/Opus), after the text (optional Outlet
        method, see core/turn/delivery.py); DeliveryError when Telegram did not take it."""
        if self._sender is None or message.audio is None:
            raise DeliveryError("the telegram channel is not started")
        target = target_of(message)
        try:
            sent = await self._sender.send_voice(target.chat_id, message.audio, target.thread_id)
        except TelegramError as exc:
            raise DeliveryError(f"telegram: {self._redact(str(exc))}") from None
        return Sent((str(sent),))

    def open_stream(
        self, message: OutboundMessage, record: StreamRecorder
    ) -> TelegramStream | None:
        """A preview of the reply `message` addresses (core.streaming.StreamingOutlet);
        None when `[telegram] streaming = "off"` or the channel is not started."""
        if message.platform != PLATFORM or self._config.streaming == "off" or self._sender is None:
            return None
        target = target_of(message)
        stream = TelegramStream(
            self._sender,
            target,
            record=record,
            presence=self._presence,
            settings=StreamSettings(
                interval_s=self._config.stream_interval_s,
                keepalive_s=self._t.draft_keepalive_s,
                abandon_s=self._t.stream_abandon_s,
            ),
            draft_id=None if is_group(target.chat_id) else next(self._draft_ids),
            shown=recorded(message.resume),
            redact=self._redact,
        )
        self._streams.add(stream)
        return stream

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        """A photo of an accepted message, fetched again by its file_id after a restart."""
        if self._files is None:
            return None
        return self._files.image_ref(locator, None, mime or "image/jpeg", name)

    def restore_attachment(self, stub: Attachment) -> Attachment | None:
        """A document or voice note of an accepted message, by its file_id (recovery)."""
        if self._files is None or stub.locator is None:
            return None
        return self._files.attachment_ref(
            stub.kind, stub.locator, stub.size, stub.mime, stub.name, stub.duration_s
        )

    def health(self) -> ChannelHealth:
        if not self._running or self._supervisor is None:
            return ChannelHealth("stopped", self._monitor.last_ok)
        reconnecting = self._supervisor.reconnecting or (
            not self._webhook and self._monitor.failing
        )
        return ChannelHealth("reconnecting" if reconnecting else "running", self._monitor.last_ok)

    # -- lifecycle -------------------------------------------------------------------

    async def _bring_up(self) -> None:
        """Idempotent: initialize (getMe), register commands, start app and updater."""
        app = self._app
        assert app is not None and app.updater is not None
        await app.initialize()
        self._me = app.bot  # initialized: it knows its id and username from getMe
        if self._commands and not self._commands_set:
            try:
                await app.bot.set_my_commands([BotCommand(n, d) for n, d in self._commands])
                self._commands_set = True
            except TelegramError as exc:
                log.warning("telegram: setMyCommands failed (%s)", self._redact(str(exc)))
        if not app.running:
            await app.start()
        if app.updater.running:
            return
        await start_receiving(app, self._config, self._t)
        self._monitor.mark_started()
        if self._webhook:
            self._monitor.record_ok()
        mode = "receiving webhooks" if self._webhook else "polling"
        log.info("telegram: @%s is %s", self._me.username, mode)

    async def _stop_updater(self) -> None:
        await stop_updater(self._app, self._t.stop_updater_s, self._redact)

    async def _teardown(self) -> None:
        app, self._app = self._app, None
        self._running = False
        if app is None:
            return
        try:
            if app.running:
                await app.stop()
            await app.shutdown()
        except (TelegramError, RuntimeError) as exc:
            log.warning("telegram: shutdown incomplete (%s)", self._redact(str(exc)))
        for request in self._requests:  # PTB skips these if initialize() never completed
            await request.shutdown()

    # -- inbound ---------------------------------------------------------------------

    async def _on_update(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """PTB calls this for every Update; work is spawned so polling never waits on it."""
        if not isinstance(update, Update) or self._me is None or self._files is None:
            return
        if self._webhook:
            self._monitor.record_ok()
        for joined in self._members.joins(update, self._me) if self._members else ():
            self._tasks.spawn(self._handle(joined))
        if update.callback_query is not None and self._presses is not None:
            self._tasks.spawn(self._presses.take(update, self._me))
            return
        result = normalise(
            update,
            self._me,
            answer_edited=self._config.answer_edited,
            image_ref=self._files.image_ref,
            attachment_ref=self._files.attachment_ref,
        )
        if isinstance(result, Skip):
            log.debug("telegram: update %s skipped: %s", update.update_id, result.reason)
            return
        self._tasks.spawn(self._handle(result))

    async def _handle(self, message: InboundMessage) -> None:
        assert self._handler is not None
        if message.chat_type is ChatType.GROUP and message.text.startswith("/"):
            # A command asks "is this an admin here": the platform's answer rides along.
            role = await self.member_role(message.chat_id, message.sender_id)
            message = replace(message, sender_role=role)
        try:
            await self._handler(message)  # answers come back through send()
        except TryLater:
            pass  # kept; answered after the restart
        except Exception:
            log.exception("telegram: handler failed for chat %s", message.chat_id)

    @contextlib.asynccontextmanager
    async def working(self, message: InboundMessage) -> AsyncIterator[None]:
        """The daemon decided to answer `message` and is making the answer: "typing…"
        until the answer's text shows, and in a group the ack reaction when it is slow
        (removed once the answer is sent)."""
        if self._sender is None or message.platform != PLATFORM:
            yield
            return
        chat = int(message.chat_id)
        thread = int(message.thread_id) if message.thread_id else None
        key = (chat, thread)
        async with contextlib.AsyncExitStack() as stack:
            group = message.chat_type is ChatType.GROUP
            if self._ack is not None and group and message.message_id is not None:
                quoted = telegram_message_id(message.message_id)
                await stack.enter_async_context(self._ack.around(key, quoted))
            await stack.enter_async_context(
                self._sender.typing(
                    chat,
                    thread,
                    delay_s=0.0,
                    interval_s=self._t.typing_interval_s,
                    quiet=lambda: self._presence.showing(key),
                )
            )
            yield

    # -- moderation (core/moderation/platform.py) -------------------------------------

    async def moderate(self, action: PlatformAction) -> None:
        """restrictChatMember / deleteMessage / banChatMember, once."""
        if self._members is None:
            raise ActionFailed("telegram is not started")
        await self._members.moderate(action)

    async def member_role(self, chat_id: str, user_id: str) -> str | None:
        return await self._members.role(chat_id, user_id) if self._members else None

    def _redact(self, text: str) -> str:
        return text.replace(self._token, "<token>") if self._token else text
