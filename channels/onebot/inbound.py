"""Frames in from a OneBot connection: meta events kept track of, messages handed to the
daemon's handler with the facts the trigger policy needs.

Every message event goes to the handler (which applies the trigger policy and the rate
limit); this fills in mentions_bot, reply_to_bot (asking the implementation who wrote
the quoted message when we have not seen it) and the sender's display name. Answers go
out through the channel's send(), never back through here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from cachetools import LRUCache

from channels.base import MessageHandler
from channels.onebot.actions import OneBotError
from channels.onebot.connections import ConnectionRegistry
from channels.onebot.events import (
    DEFAULT_MAX_TEXT_CHARS,
    InvalidEvent,
    id_param,
    member_joined,
    qq_number,
    to_inbound,
    with_reply,
)
from channels.onebot.files import QQFiles
from channels.onebot.members import member_name
from channels.onebot.message import ParsedMessage, interpret, normalize_message
from channels.onebot.outbound import Authors
from channels.onebot.transport import OneBotConnection
from core.media.fetch import DownloadError, SafeDownloader
from core.messages import (
    Attachment,
    ImageRef,
    InboundMessage,
    TryLater,
)

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, object]], None]


@dataclass(frozen=True)
class Quoted:
    """What a reply quotes: its author, text and files (a `/kb add` reads them)."""

    author: str | None = None
    text: str | None = None
    files: tuple[Attachment, ...] = ()


class Inbound:
    """Turns frames into handler calls; one per channel."""

    def __init__(
        self,
        registry: ConnectionRegistry,
        authors: Authors,
        downloader: SafeDownloader,
        *,
        spawn: Spawn,
        on_alive: Callable[[], None],
        action_timeout_s: float,
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    ) -> None:
        self._registry = registry
        self._authors = authors
        self._downloader = downloader
        self._files = QQFiles(downloader, action_timeout_s=action_timeout_s)
        # What recent messages said, so a reply's quoted links are read without a get_msg.
        self._texts: LRUCache[tuple[str, str], str] = LRUCache(2048)
        # ... and what files they carried, so `/kb add` as a reply to a file can read it
        # (a miss: the one get_msg of the reply names the files, see _reply_target).
        self._files_of: LRUCache[tuple[str, str], tuple[Attachment, ...]] = LRUCache(512)
        self._spawn = spawn
        self._on_alive = on_alive
        self._action_timeout_s = action_timeout_s
        self._max_text_chars = max_text_chars
        self.handler: MessageHandler | None = None

    def on_frame(
        self, conn: OneBotConnection, frame: dict[str, Any], oversize: int | None = None
    ) -> None:
        """`oversize`: the frame's size when it was over the cap and its long strings cut."""
        self._on_alive()
        self_id = qq_number(frame.get("self_id"))
        if self_id is not None and conn.self_id is None:
            self._registry.adopt_self_id(conn, self_id)
        post_type = frame.get("post_type")
        if post_type == "meta_event":
            self._on_meta(conn, frame)
        elif post_type == "message":
            draft = self._draft(conn, frame, oversize)
            if draft is not None:
                self._spawn(self._dispatch(conn, *draft))
        elif post_type == "notice" and frame.get("notice_type") == "group_increase":
            self._spawn(self._joined(conn, frame))
        elif post_type == "message_sent":
            log.debug("onebot%s: own message echo ignored", conn.label)
        else:
            log.debug("onebot%s: %s event ignored", conn.label, post_type)

    def _on_meta(self, conn: OneBotConnection, frame: dict[str, Any]) -> None:
        kind = frame.get("meta_event_type")
        if kind == "heartbeat":
            interval = frame.get("interval")
            if isinstance(interval, int | float) and interval > 0:
                conn.heartbeat_interval_s = interval / 1000.0
            status = frame.get("status")
            if isinstance(status, dict) and status.get("online") is False:
                log.warning("onebot%s: implementation reports the account offline", conn.label)
        elif kind == "lifecycle":
            log.info("onebot%s: lifecycle %s", conn.label, frame.get("sub_type"))

    def _draft(
        self, conn: OneBotConnection, frame: dict[str, Any], oversize: int | None = None
    ) -> tuple[InboundMessage, ParsedMessage] | None:
        """Event -> InboundMessage (reply fields filled in later). None: not for us."""
        try:
            draft = to_inbound(
                frame,
                conn.self_id,
                self.image_ref,
                self._max_text_chars,
                partial(self._files.attachment, lambda: conn),
                oversize=oversize,
            )
        except InvalidEvent as exc:
            log.warning("onebot%s: message event ignored: %s", conn.label, exc)
            return None
        if draft is None:
            return None  # our own message, reported back
        message = draft[0]
        if conn.self_id is not None:
            if message.message_id is not None:
                self._authors[(conn.self_id, message.message_id)] = message.sender_id
                if message.text:
                    self._texts[(conn.self_id, message.message_id)] = message.text
                if message.attachments:
                    self._files_of[(conn.self_id, message.message_id)] = message.attachments
            self._registry.note_route(message.chat_id, conn.self_id)
        return draft

    async def _dispatch(
        self, conn: OneBotConnection, message: InboundMessage, parsed: ParsedMessage
    ) -> None:
        if parsed.reply_to is not None:
            command = message.text.lstrip().startswith("/")
            quoted = await self._reply_target(conn, parsed.reply_to, command=command)
            message = with_reply(message, quoted.author, conn.self_id, quoted.text)
            if command:
                message = replace(message, reply_attachments=quoted.files)
        assert self.handler is not None
        try:
            await self.handler(message)  # answers go out through the channel's send()
        except TryLater:
            pass  # kept; answered after the restart
        except Exception:
            log.exception("onebot%s: handler failed for message %s", conn.label, message.message_id)

    async def _joined(self, conn: OneBotConnection, frame: dict[str, Any]) -> None:
        """A member joined a group: their name asked for once (it is not in the notice)."""
        group, user = frame.get("group_id"), frame.get("user_id")
        name = None
        if qq_number(group) is not None and qq_number(user) is not None:
            name = await member_name(conn, str(group), str(user), self._action_timeout_s)
        message = member_joined(frame, conn.self_id, name)
        if message is None or self.handler is None:
            return
        if conn.self_id is not None:
            self._registry.note_route(message.chat_id, conn.self_id)
        try:
            await self.handler(message)
        except TryLater:
            pass
        except Exception:
            log.exception("onebot%s: handler failed for a member joining", conn.label)

    async def _reply_target(
        self, conn: OneBotConnection, message_id: str, *, command: bool
    ) -> Quoted:
        """Who wrote the replied-to message, its text and files: our caches first, then one
        `get_msg`. A command (`/kb add`) also asks when the caches hold neither text nor
        files of it (evicted, or the bot restarted), so a file shared before still reads."""
        key = (conn.self_id, message_id) if conn.self_id is not None else None
        cached = Quoted()
        if key is not None:
            known = self._authors.get(key)
            text, files = self._texts.get(key), self._files_of.get(key)
            cached = Quoted(str(known) if known is not None else None, text, files or ())
            if known is not None and (not command or text is not None or files is not None):
                return cached
        try:
            data = await conn.actions.call(
                "get_msg",
                {"message_id": id_param(message_id)},
                timeout_s=min(self._action_timeout_s, 3.0),
            )
        except OneBotError as exc:
            log.debug("onebot%s: get_msg %s failed: %s", conn.label, message_id, exc)
            return cached  # what the caches knew (the author, at least) still counts
        if not isinstance(data, dict):
            return cached
        sender = data.get("sender") if isinstance(data.get("sender"), dict) else {}
        found = qq_number(sender.get("user_id", data.get("user_id")))  # type: ignore[union-attr]
        author = found if found is not None else cached.author
        if data.get("message") is None:
            return Quoted(author, cached.text, cached.files)
        body = interpret(normalize_message(data["message"]), conn.self_id)
        files = tuple(self._files.attachment(lambda: conn, seg) for seg in body.files)
        return Quoted(author, body.text or None, files)

    def restore_attachment(self, stub: Attachment) -> Attachment | None:
        """A file or voice note of an accepted message, asked for again after a restart
        through the account connected now (with several, the newest connected)."""
        return self._files.restore(
            stub, lambda: self._registry.live(self._registry.account_for(""))
        )

    def image_ref(self, url: str, file: str) -> ImageRef:
        """A lazy image: fetched (size- and host-checked) only if the vision model needs it."""

        async def fetch() -> bytes:
            got = await self._downloader.fetch(url)
            kind = (got.content_type or "").lower()
            if kind and not kind.startswith("image/") and kind != "application/octet-stream":
                raise DownloadError(f"not an image ({kind})")
            return got.data

        return ImageRef(fetch=fetch, name=file, locator=url)
