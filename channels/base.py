"""The seam between the daemon and every chat platform."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from core.messages import ImageRef, InboundMessage, OutboundMessage, Reply, Sent

ChannelState = Literal["running", "reconnecting", "stopped"]

# The one callback a channel needs: hand every message in (the daemon decides commands,
# triggers and the per-user rate limit; a channel only reports facts such as mentions_bot
# and reply_to_bot), maybe get a reply back. The channel splits and sends it.
MessageHandler = Callable[[InboundMessage], Awaitable[Reply | None]]


@dataclass
class ChannelHealth:
    state: ChannelState = "stopped"
    last_ok: datetime | None = None


class Channel(Protocol):
    """A platform adapter: turns platform events into InboundMessages and sends replies."""

    name: str
    # True: the core sends replies through send() (and recovery can, after a crash).
    # False (HTTP): the reply travels back in the response to the request.
    pushes: bool

    async def start(self, handler: MessageHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> Sent | None:
        """Deliver; raise core.messages.DeliveryError when the platform did not take it."""

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        """Rebuild an accepted message's image from its locator (recovery after a crash)."""

    def health(self) -> ChannelHealth: ...
