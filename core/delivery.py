"""Where replies go out: the started channels, found by platform name.

Why the core sends instead of handing the reply back to the channel: a reply is only
`delivered` once the platform confirmed it, and recovery must be able to send a reply
whose original request is long gone (after a crash, on another replica). Both paths
go through here, so both meet the same channel code and the same state rules.
"""

from __future__ import annotations

from typing import Protocol

from core.messages import DeliveryError, ImageRef, OutboundMessage, Sent
from core.streaming import ReplyStream, StreamRecorder


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
