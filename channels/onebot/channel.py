"""The QQ channel over OneBot v11 (NapCat, Lagrange, go-cqhttp), on aiohttp.

Every message event goes to the daemon's handler (which applies the trigger policy and
the rate limit); the channel fills in the facts the policy needs (mentions_bot,
reply_to_bot, the sender's display name) and sends the Reply back as segments, split to
QQ's length limit.

Chat ids encode the chat type, because QQ group and user numbers share one space:
`group:<group id>` and `private:<user id>`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from cachetools import LRUCache

from channels.base import ChannelHealth, MessageHandler
from channels.config import OnebotConfig
from channels.download import DownloadError, DownloadPolicy, SafeDownloader
from channels.formatting.split import split_text
from channels.onebot.actions import OneBotError
from channels.onebot.events import (
    InvalidEvent,
    id_param,
    parse_chat_id,
    to_inbound,
    with_reply,
)
from channels.onebot.message import ParsedMessage, Segment, reply_segment, text_segment
from channels.onebot.transport import (
    CLOSE_REPLACED,
    ForwardClient,
    OneBotConnection,
    ReverseServer,
)
from core.inject import clean_name
from core.messages import DeliveryError, ImageRef, InboundMessage, OutboundMessage, Reply, Sent
from core.ordering import TaskTracker

log = logging.getLogger(__name__)

QQ_TEXT_LIMIT = 4500
DM_REFUSED = (
    "I couldn't send you a private message. Please add me as a friend or message me "
    "directly first, then ask again there."
)
_RECENT_IDS = 4096


class OneBotUnavailable(OneBotError):
    """No implementation is connected, so nothing can be sent."""


class OneBotChannel:
    """Channel Protocol implementation for QQ via any OneBot v11 implementation."""

    name = "qq"
    pushes = True

    def __init__(
        self,
        config: OnebotConfig,
        *,
        image_max_bytes: int,
        action_timeout_s: float = 10.0,
        download_timeout_s: float = 20.0,
        reconnect_min_s: float = 1.0,
        reconnect_max_s: float = 60.0,
        heartbeat_grace: float = 3.0,
        downloader: SafeDownloader | None = None,
        send_wait_s: float = 30.0,
    ) -> None:
        if config.mode == "forward_ws" and not config.url:
            raise ValueError("onebot.url is required when onebot.mode = 'forward_ws'")
        self._config = config
        self._token = config.access_token.get_secret_value() if config.access_token else None
        self._action_timeout_s = action_timeout_s
        self._send_wait_s = send_wait_s  # how long a reply waits for its connection
        self._reconnect = (reconnect_min_s, reconnect_max_s)
        self._grace = heartbeat_grace
        self._downloader = downloader or SafeDownloader(
            DownloadPolicy(
                max_bytes=image_max_bytes,
                timeout_s=download_timeout_s,
                allow_private_hosts=tuple(config.allow_private_media_hosts),
            )
        )
        self._handler: MessageHandler | None = None
        self._connections: dict[str, OneBotConnection] = {}  # by self id (or a temp key)
        # Recent ids only, least recently used first out: never unbounded.
        self._routes: LRUCache[str, str] = LRUCache(_RECENT_IDS)  # chat id -> self id seeing it
        self._senders: LRUCache[tuple[str, str], str] = LRUCache(_RECENT_IDS)  # -> sender id
        self._tasks = TaskTracker("onebot")
        self._server: ReverseServer | None = None
        self._client: ForwardClient | None = None
        self._running = False
        self._last_ok: datetime | None = None

    # -- lifecycle -------------------------------------------------------------------

    @property
    def listen_port(self) -> int | None:
        """The bound port in reverse mode (useful when configured as 0)."""
        return self._server.bound_port if self._server else None

    @property
    def accounts(self) -> list[str]:
        """QQ numbers of the accounts connected right now (for status displays)."""
        return sorted(c.self_id for c in self._connections.values() if c.self_id and not c.closed)

    async def start(self, handler: MessageHandler) -> None:
        self._handler = handler
        if self._config.mode == "reverse_ws":
            self._server = ReverseServer(
                host=self._config.host,
                port=self._config.port,
                path=self._config.path,
                access_token=self._token,
                make_connection=self._new_connection,
                on_connection=self._serve,
            )
            await self._server.start()
            if self._token is None and self._config.host not in ("127.0.0.1", "::1", "localhost"):
                log.warning(
                    "onebot: listening on %s without an access_token: anyone who can reach "
                    "this port can act as your QQ account's implementation",
                    self._config.host,
                )
        else:
            assert self._config.url is not None
            self._client = ForwardClient(
                url=self._config.url,
                access_token=self._token,
                make_connection=lambda ws: self._new_connection(ws, None),
                on_connection=self._serve,
                backoff_min_s=self._reconnect[0],
                backoff_max_s=self._reconnect[1],
                connect_timeout_s=max(self._action_timeout_s, 1.0),
            )
            await self._client.start()
        self._running = True

    async def stop(self) -> None:
        self._running = False
        if self._client is not None:
            await self._client.stop()
        for conn in list(self._connections.values()):
            await conn.close("chatterd is shutting down")
        await self._tasks.cancel()
        if self._server is not None:
            await self._server.stop()

    def health(self) -> ChannelHealth:
        if not self._running:
            return ChannelHealth("stopped", self._last_ok)
        live = [c for c in self._connections.values() if not c.closed and not c.stale()]
        return ChannelHealth("running" if live else "reconnecting", self._last_ok)

    # -- connections -----------------------------------------------------------------

    def _new_connection(self, ws: Any, self_id: str | None) -> OneBotConnection:
        return OneBotConnection(
            ws,
            self_id=self_id,
            action_timeout_s=self._action_timeout_s,
            heartbeat_grace=self._grace,
            label=f"[{self_id or '?'}]",
        )

    async def _serve(self, conn: OneBotConnection) -> None:
        """Own one connection for its lifetime; a newer one for the same account wins."""
        await self._register(conn)
        self._tasks.spawn(self._login_info(conn))
        try:
            await conn.run(self._on_frame)
        finally:
            for key, known in list(self._connections.items()):
                if known is conn:
                    del self._connections[key]
            log.info("onebot%s: connection closed", conn.label)

    async def _register(self, conn: OneBotConnection) -> None:
        key = conn.self_id or f"?{id(conn)}"
        old = self._connections.get(key)
        self._connections[key] = conn
        if old is not None and old is not conn:
            log.info("onebot[%s]: new connection replaces the old one", key)
            await old.close("replaced by a newer connection", code=CLOSE_REPLACED)
        self._mark_ok()

    def _adopt_self_id(self, conn: OneBotConnection, self_id: str) -> None:
        """Forward mode (or a missing X-Self-ID) learns the account from the first frame."""
        if conn.self_id == self_id:
            return
        conn.self_id, conn.label = self_id, f"[{self_id}]"
        for key, known in list(self._connections.items()):
            if known is conn:
                del self._connections[key]
        old = self._connections.get(self_id)
        self._connections[self_id] = conn
        if old is not None and old is not conn:
            self._tasks.spawn(old.close("replaced by a newer connection", code=CLOSE_REPLACED))

    async def _login_info(self, conn: OneBotConnection) -> None:
        try:
            info = await conn.actions.call("get_login_info")
        except OneBotError as exc:
            log.warning("onebot%s: get_login_info failed: %s", conn.label, exc)
            return
        if isinstance(info, dict) and info.get("user_id") is not None:
            self._adopt_self_id(conn, str(info["user_id"]))
            log.info(
                "onebot%s: logged in as %s",
                conn.label,
                clean_name(str(info.get("nickname") or "")) or "?",
            )

    def _mark_ok(self) -> None:
        self._last_ok = datetime.now(UTC)

    # -- events ----------------------------------------------------------------------

    def _on_frame(self, conn: OneBotConnection, frame: dict[str, Any]) -> None:
        self._mark_ok()
        self_id = frame.get("self_id")
        if self_id is not None and conn.self_id is None:
            self._adopt_self_id(conn, str(self_id))
        post_type = frame.get("post_type")
        if post_type == "meta_event":
            self._on_meta(conn, frame)
        elif post_type == "message":
            self._on_message(conn, frame)
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

    def _on_message(self, conn: OneBotConnection, frame: dict[str, Any]) -> None:
        draft = self._draft(conn, frame)
        if draft is not None:
            self._tasks.spawn(self._dispatch(conn, *draft))

    def _draft(
        self, conn: OneBotConnection, frame: dict[str, Any]
    ) -> tuple[InboundMessage, ParsedMessage] | None:
        """Event -> InboundMessage (reply fields filled in later). None: not for us."""
        try:
            draft = to_inbound(frame, conn.self_id, self._image_ref)
        except InvalidEvent as exc:
            log.warning("onebot%s: message event ignored: %s", conn.label, exc)
            return None
        if draft is None:
            return None  # our own message, reported back
        message = draft[0]
        if conn.self_id is not None:
            if message.message_id is not None:
                self._senders[(conn.self_id, message.message_id)] = message.sender_id
            self._routes[message.chat_id] = conn.self_id
        return draft

    async def _dispatch(
        self, conn: OneBotConnection, message: InboundMessage, parsed: ParsedMessage
    ) -> None:
        if parsed.reply_to is not None:
            target = await self._reply_target(conn, parsed.reply_to)
            message = with_reply(message, target, conn.self_id)
        assert self._handler is not None
        try:
            reply = await self._handler(message)
        except Exception:
            log.exception("onebot%s: handler failed for message %s", conn.label, message.message_id)
            return
        if reply is not None and reply.text.strip():
            await self._deliver(conn, message, reply)

    async def _reply_target(self, conn: OneBotConnection, message_id: str) -> str | None:
        """Who wrote the replied-to message: our cache first, then `get_msg`."""
        if conn.self_id is not None:
            known = self._senders.get((conn.self_id, message_id))
            if known is not None:
                return str(known)
        try:
            data = await conn.actions.call(
                "get_msg",
                {"message_id": id_param(message_id)},
                timeout_s=min(self._action_timeout_s, 3.0),
            )
        except OneBotError as exc:
            log.debug("onebot%s: get_msg %s failed: %s", conn.label, message_id, exc)
            return None
        if not isinstance(data, dict):
            return None
        sender = data.get("sender") if isinstance(data.get("sender"), dict) else {}
        found = sender.get("user_id", data.get("user_id"))  # type: ignore[union-attr]
        return str(found) if found is not None else None

    def _image_ref(self, url: str, file: str) -> ImageRef:
        async def fetch() -> bytes:
            got = await self._downloader.fetch(url)
            kind = (got.content_type or "").lower()
            if kind and not kind.startswith("image/") and kind != "application/octet-stream":
                raise DownloadError(f"not an image ({kind})")
            return got.data

        return ImageRef(fetch=fetch, name=file, locator=url)

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        """An image of an accepted message, fetched again from its URL after a restart."""
        return self._image_ref(locator, name)

    # -- sending ---------------------------------------------------------------------

    async def _deliver(self, conn: OneBotConnection, message: InboundMessage, reply: Reply) -> None:
        kind, target = parse_chat_id(message.chat_id)
        try:
            if kind == "group" and reply.private:
                try:
                    await self._send_text(
                        conn, "private", message.sender_id, reply.text, temp_group=target
                    )
                except OneBotError as exc:
                    log.info(
                        "onebot%s: DM to %s refused (%s); saying so in the group",
                        conn.label,
                        message.sender_id,
                        exc,
                    )
                    await self._send_text(
                        conn, "group", target, DM_REFUSED, reply_to=message.message_id
                    )
                return
            reply_to = message.message_id if kind == "group" else None
            await self._send_text(conn, kind, target, reply.text, reply_to=reply_to)
        except OneBotError as exc:
            log.warning("onebot%s: reply to %s not delivered: %s", conn.label, message.chat_id, exc)

    async def send(self, message: OutboundMessage) -> Sent:
        """Send a reply the core sends. Waits (bounded) for the account's connection to be
        up, so a reply survives a reconnect; DeliveryError when it could not be sent."""
        kind, target = parse_chat_id(message.chat_id)
        reply_to = message.reply_to_message_id if kind == "group" else None
        deadline = asyncio.get_running_loop().time() + self._send_wait_s
        while True:
            try:
                conn = self._connection_for(message.chat_id)
                ids = await self._send_text(conn, kind, target, message.text, reply_to=reply_to)
                return Sent(tuple(ids))
            except OneBotUnavailable as exc:
                if not self._running or asyncio.get_running_loop().time() > deadline:
                    raise DeliveryError(f"onebot: {exc}") from None
                await asyncio.sleep(0.2)
            except OneBotError as exc:
                raise DeliveryError(f"onebot: {exc}") from exc

    def _connection_for(self, chat_id: str) -> OneBotConnection:
        live = {k: c for k, c in self._connections.items() if not c.closed}
        preferred = self._routes.get(chat_id)
        if preferred in live:
            return live[preferred]
        if live:
            return list(live.values())[-1]
        raise OneBotUnavailable("no OneBot implementation is connected")

    async def _send_text(
        self,
        conn: OneBotConnection,
        kind: str,
        target: str,
        text: str,
        *,
        reply_to: str | None = None,
        temp_group: str | None = None,
    ) -> list[str]:
        sent: list[str] = []
        for index, chunk in enumerate(split_text(text, QQ_TEXT_LIMIT)):
            segments: list[Segment] = []
            if index == 0 and reply_to:
                segments.append(reply_segment(reply_to))
            segments.append(text_segment(chunk))  # user text stays a text segment: no CQ codes
            params: dict[str, Any] = {"message": segments}
            if kind == "group":
                params["group_id"] = id_param(target)
                action = "send_group_msg"
            else:
                params["user_id"] = id_param(target)
                if temp_group is not None:  # lets go-cqhttp/NapCat open a temporary session
                    params["group_id"] = id_param(temp_group)
                action = "send_private_msg"
            data = await conn.actions.call(action, params)
            self._mark_ok()
            if isinstance(data, dict) and data.get("message_id") is not None:
                sent.append(str(data["message_id"]))
                if conn.self_id:
                    self._senders[(conn.self_id, str(data["message_id"]))] = conn.self_id
        return sent
