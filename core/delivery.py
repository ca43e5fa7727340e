"""Where replies go out: the started channels, found by platform name.

Why the core sends instead of handing the reply back to the channel: a reply is only
`delivered` once the platform confirmed it, and recovery must be able to send a reply
whose original request is long gone (after a crash, on another replica). Both paths
go through here, so both meet the same channel code and the same state rules.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from core.messages import Attachment, DeliveryError, ImageRef, OutboundMessage, Sent
from core.storage import Intake
from core.streaming import ReplyStream, StreamRecorder

log = logging.getLogger(__name__)


class Outlet(Protocol):
    """The part of a channel the core needs: send, and rebuild an image from its locator."""

    name: str

    async def send(self, message: OutboundMessage) -> Sent | None: ...

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None: ...


class ChannelRoutes:
    """The outlets of the started channels, by platform name (one per platform)."""

    def __init__(self) -> None:
        self._outlets: dict[str, Outlet] = {}

    def add(self, outlet: Outlet) -> None:
        self._outlets[outlet.name] = outlet

    def remove(self, outlet: Outlet) -> None:
        if self._outlets.get(outlet.name) is outlet:
            del self._outlets[outlet.name]

    def can_send(self, platform: str) -> bool:
        return platform in self._outlets

    async def deliver(self, message: OutboundMessage) -> Sent:
        """Send through the message's channel; DeliveryError when it cannot be sent now."""
        outlet = self._outlets.get(message.platform)
        if outlet is None:
            raise DeliveryError(f"no {message.platform} channel is running")
        return await outlet.send(message) or Sent()

    def open_stream(self, message: OutboundMessage, record: StreamRecorder) -> ReplyStream | None:
        """A preview stream when the message's channel can show one for this chat."""
        outlet = self._outlets.get(message.platform)
        opener = getattr(outlet, "open_stream", None)
        return opener(message, record) if opener is not None else None

    def restore_image(
        self, platform: str, locator: str, mime: str | None, name: str
    ) -> ImageRef | None:
        outlet = self._outlets.get(platform)
        return outlet.restore_image(locator, mime, name) if outlet is not None else None

    async def send_audio(self, outbound: OutboundMessage) -> Sent | None:
        """A spoken reply through the channel's optional `send_audio`; None: it has none."""
        send = getattr(self._outlets.get(outbound.platform), "send_audio", None)
        return await send(outbound) if callable(send) else None

    def restore_attachment(self, platform: str, stub: Attachment) -> Attachment | None:
        """A document or voice note fetchable again, for channels that can (optional)."""
        restore = getattr(self._outlets.get(platform), "restore_attachment", None)
        return restore(stub) if callable(restore) else None


class Outbox:
    """Replies to accepted messages on their way out, and the intake row told about it.

    Why beside the routes: a reply is `delivered` only once the platform confirmed it,
    and a preview's messages are recorded on the row while it streams; the live path
    and recovery both send through here, so both keep the same rules.
    """

    def __init__(self, routes: ChannelRoutes | None, intake: Intake) -> None:
        self._routes = routes
        self._intake = intake

    def delivers(self, platform: str) -> bool:
        """The core sends this platform's replies (False: HTTP answers in its response)."""
        return self._routes is not None and self._routes.can_send(platform)

    def open_stream(self, entry_id: int, target: OutboundMessage) -> ReplyStream | None:
        """A preview of the reply while it is written, where the channel shows one; the
        channel's record of its messages goes on the row, so a crash mid-stream is
        finished in those same messages (`target.resume` next time), not in a copy."""
        if self._routes is None or not self.delivers(target.platform):
            return None

        async def record(delivery: dict[str, Any]) -> None:
            await self._intake.note_delivery(entry_id, delivery)

        return self._routes.open_stream(target, record)

    async def deliver(
        self, entry_id: int, outbound: OutboundMessage, stream: ReplyStream | None = None
    ) -> bool:
        """Send (or finish the preview with) the reply; the row becomes `delivered` once
        the platform confirmed it, `failed` when it can never be delivered. False: not
        delivered now, recovery tries again."""
        try:
            sent = await self._send(outbound, stream)
        except DeliveryError as exc:
            if exc.permanent:
                log.warning(
                    "reply to %s:%s can never be delivered (%s); message settled as failed",
                    outbound.platform,
                    outbound.chat_id,
                    exc,
                )
                await self._intake.move(entry_id, "failed", expected=["answered"])
                return True
            log.warning(
                "reply to %s:%s not delivered yet (%s); recovery will try again",
                outbound.platform,
                outbound.chat_id,
                exc,
            )
            return False
        await self._intake.move(
            entry_id, "delivered", expected=["answered"], delivery={"ids": list(sent.message_ids)}
        )
        return True

    async def send_proactive(self, outbound: OutboundMessage) -> Sent:
        """A message no inbound message asked for at this moment (a reminder, a scheduled
        task's answer): sent through the same channel code as replies. Raises
        DeliveryError when the chat cannot be reached now (no such channel running, the
        platform refused it, an HTTP chat with no push target)."""
        return await self._send(outbound, None)

    async def tell(self, outbound: OutboundMessage, stream: ReplyStream | None = None) -> None:
        """Best effort, for a message that is settled already (an apology)."""
        try:
            await self._send(outbound, stream)
        except DeliveryError as exc:
            log.warning(
                "apology to %s:%s not delivered: %s", outbound.platform, outbound.chat_id, exc
            )

    async def _send(self, outbound: OutboundMessage, stream: ReplyStream | None) -> Sent:
        if stream is not None:
            sent = await stream.finish(outbound.text)
        elif self._routes is None:
            raise DeliveryError(f"no {outbound.platform} channel is running")
        else:
            sent = await self._routes.deliver(outbound)
        if outbound.audio is not None:
            await self._send_audio(outbound)
        return sent

    async def _send_audio(self, outbound: OutboundMessage) -> None:
        """The spoken version goes after the text, best effort: the text is delivered
        already, so a voice message the platform refuses is logged, never retried."""
        if self._routes is None:
            return
        try:
            await self._routes.send_audio(outbound)
        except DeliveryError as exc:
            log.warning(
                "voice reply to %s:%s not sent (text was): %s",
                outbound.platform,
                outbound.chat_id,
                exc,
            )
