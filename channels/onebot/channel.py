"""The QQ channel over OneBot v11 (NapCat, Lagrange, go-cqhttp), on aiohttp.

This module wires the parts and owns the lifecycle: the transports (transport.py)
bring connections, the registry (connections.py) knows which are live for which
account, frames go in through inbound.py, replies go out through outbound.py, paced
per account by pacing.py.

Chat ids encode the chat type, because QQ group and user numbers share one space:
`group:<group id>` and `private:<user id>`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cachetools import LRUCache

from channels.base import ChannelHealth, MessageHandler
from channels.config import OnebotConfig
from channels.onebot.actions import OneBotError
from channels.onebot.connections import ConnectionRegistry, OneBotUnavailable
from channels.onebot.events import keep_chars_for
from channels.onebot.inbound import Inbound
from channels.onebot.members import MemberRoles, member_name, moderate
from channels.onebot.outbound import Authors, Outbound
from channels.onebot.pacing import SendPacer
from channels.onebot.transport import ForwardClient, OneBotConnection, ReverseServer
from core.clock import Clock
from core.inject import clean_name
from core.media.fetch import DownloadPolicy, SafeDownloader
from core.messages import Attachment, ImageRef, OutboundMessage, Sent
from core.moderation.platform import ActionFailed, PlatformAction
from core.tasks import TaskTracker

log = logging.getLogger(__name__)

_RECENT_IDS = 4096


@dataclass(frozen=True)
class OneBotTimings:
    """Every wait the channel makes, so tests can run it fast."""

    action_timeout_s: float = 10.0  # an API call's answer over the link
    download_timeout_s: float = 20.0  # an image fetched from QQ's servers
    reconnect_min_s: float = 1.0  # forward mode: backoff between connection attempts
    reconnect_max_s: float = 60.0
    heartbeat_grace: float = 3.0  # missed heartbeat intervals before a link counts as dead
    send_wait_s: float = 30.0  # a reply waits this long for its account to be connected


class OneBotChannel:
    """Channel Protocol implementation for QQ via any OneBot v11 implementation."""

    name = "qq"
    pushes = True
    shows_images = True  # OutboundMessage.image goes out as a picture
    sends_files = True  # OutboundMessage.document goes out as an uploaded QQ file

    def __init__(
        self,
        config: OnebotConfig,
        *,
        image_max_bytes: int,
        timings: OneBotTimings | None = None,
        downloader: SafeDownloader | None = None,
        clock: Clock | None = None,
    ) -> None:
        if config.mode == "forward_ws" and not config.url:
            raise ValueError("onebot.url is required when onebot.mode = 'forward_ws'")
        self._config = config
        self._token = config.access_token.get_secret_value() if config.access_token else None
        self._t = timings or OneBotTimings()
        self._tasks = TaskTracker("onebot")
        self._registry = ConnectionRegistry(self._tasks.spawn)
        self._pacer = SendPacer(config.send_interval_s, clock)
        authors: Authors = LRUCache(_RECENT_IDS)  # never unbounded
        self._outbound = Outbound(
            self._registry,
            self._pacer,
            authors,
            forward_over_chars=config.forward_over_chars,
            on_sent=self._mark_ok,
            send_wait_s=self._t.send_wait_s,
        )
        self._inbound = Inbound(
            self._registry,
            authors,
            downloader
            or SafeDownloader(
                DownloadPolicy(
                    max_bytes=image_max_bytes,
                    timeout_s=self._t.download_timeout_s,
                    allow_private_hosts=tuple(config.allow_private_media_hosts),
                )
            ),
            spawn=self._tasks.spawn,
            on_alive=self._mark_ok,
            action_timeout_s=self._t.action_timeout_s,
            max_text_chars=config.max_text_chars,
        )
        self._server: ReverseServer | None = None
        self._client: ForwardClient | None = None
        self._running = False
        self._last_ok: datetime | None = None
        self._roles = MemberRoles()

    # -- lifecycle -------------------------------------------------------------------

    @property
    def listen_port(self) -> int | None:
        """The bound port in reverse mode (useful when configured as 0)."""
        return self._server.bound_port if self._server else None

    @property
    def accounts(self) -> list[str]:
        """QQ numbers of the accounts connected right now (for status displays)."""
        return self._registry.accounts

    async def start(self, handler: MessageHandler) -> None:
        self._inbound.handler = handler
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
                backoff_min_s=self._t.reconnect_min_s,
                backoff_max_s=self._t.reconnect_max_s,
                connect_timeout_s=max(self._t.action_timeout_s, 1.0),
            )
            await self._client.start()
        self._running = True

    async def stop(self) -> None:
        """Sends still queued fail (DeliveryError for the core's), then links close."""
        self._running = False
        await self._pacer.close()
        if self._client is not None:
            await self._client.stop()
        for conn in self._registry.all():
            await conn.close("chatterd is shutting down")
        await self._tasks.cancel()
        if self._server is not None:
            await self._server.stop()

    def health(self) -> ChannelHealth:
        if not self._running:
            return ChannelHealth("stopped", self._last_ok)
        live = [c for c in self._registry.all() if not c.closed and not c.stale()]
        return ChannelHealth("running" if live else "reconnecting", self._last_ok)

    def _mark_ok(self) -> None:
        self._last_ok = datetime.now(UTC)

    # -- connections -----------------------------------------------------------------

    def _new_connection(self, ws: Any, self_id: str | None) -> OneBotConnection:
        return OneBotConnection(
            ws,
            self_id=self_id,
            action_timeout_s=self._t.action_timeout_s,
            heartbeat_grace=self._t.heartbeat_grace,
            label=f"[{self_id or '?'}]",
            keep_chars=keep_chars_for(self._config.max_text_chars),
        )

    async def _serve(self, conn: OneBotConnection) -> None:
        """Own one connection for its lifetime; a newer one for the same account wins."""
        await self._registry.register(conn)
        self._mark_ok()
        self._tasks.spawn(self._login_info(conn))
        try:
            await conn.run(self._inbound.on_frame)
        finally:
            self._registry.forget(conn)
            log.info("onebot%s: connection closed", conn.label)

    async def _login_info(self, conn: OneBotConnection) -> None:
        try:
            info = await conn.actions.call("get_login_info")
        except OneBotError as exc:
            log.warning("onebot%s: get_login_info failed: %s", conn.label, exc)
            return
        if isinstance(info, dict) and info.get("user_id") is not None:
            self._registry.adopt_self_id(conn, str(info["user_id"]))
            conn.nickname = clean_name(str(info.get("nickname") or "")) or None
            log.info("onebot%s: logged in as %s", conn.label, conn.nickname or "?")

    # -- the core's side -------------------------------------------------------------

    async def send(self, message: OutboundMessage) -> Sent:
        """Send a reply the core sends (see Outbound.send); DeliveryError if not sent."""
        return await self._outbound.send(message, lambda: self._running)

    async def react(self, message: OutboundMessage) -> bool:
        """A one-emoji answer as a reaction where the implementation has one (NapCat's
        `set_msg_emoji_like`; optional Outlet method, see core/turn/delivery.py)."""
        return await self._outbound.react(message)

    async def send_audio(self, message: OutboundMessage) -> Sent:
        """A spoken reply as a QQ `record` (optional Outlet method, see core/turn/delivery.py)."""
        return await self._outbound.send_audio(message)

    # -- moderation (core/moderation/platform.py) -------------------------------------

    def _conn_for(self, chat_id: str) -> OneBotConnection:
        try:
            return self._registry.live(self._registry.account_for(chat_id))
        except OneBotUnavailable as exc:  # nobody to ask
            raise ActionFailed(str(exc)) from None

    async def moderate(self, action: PlatformAction) -> None:
        """set_group_ban / delete_msg / set_group_kick, once (NoRights: retcode ≠ 0)."""
        await moderate(self._conn_for(action.chat_id), action)

    async def member_role(self, chat_id: str, user_id: str) -> str | None:
        try:
            conn = self._conn_for(chat_id)
        except ActionFailed:
            return None
        return await self._roles.role(conn, chat_id, user_id, self._t.action_timeout_s)

    async def member_name(self, chat_id: str, user_id: str) -> str | None:
        try:
            conn = self._conn_for(chat_id)
        except ActionFailed:
            return None
        return await member_name(conn, chat_id.partition(":")[2], user_id, self._t.action_timeout_s)

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        """An image of an accepted message, fetched again from its URL after a restart."""
        return self._inbound.image_ref(locator, name)

    def restore_attachment(self, stub: Attachment) -> Attachment | None:
        """A file or voice note of an accepted message, asked for again (recovery)."""
        return self._inbound.restore_attachment(stub)
