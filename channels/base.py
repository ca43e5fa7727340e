"""The seam between the daemon and every chat platform."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from core.messages import ImageRef, InboundMessage, OutboundMessage, Sent

ChannelState = Literal["running", "reconnecting", "stopped"]

# The one callback a channel needs: hand every message in (the daemon decides commands,
# triggers and the per-user rate limit; a channel only reports facts such as mentions_bot
# and reply_to_bot). Nothing comes back: every answer reaches the chat through the
# channel's send() (core/turn/delivery.py). It may raise core.messages.TryLater: the message
# is kept and answered after a restart (HTTP says 503; the others stay silent).
MessageHandler = Callable[[InboundMessage], Awaitable[None]]


@dataclass
class ChannelHealth:
    state: ChannelState = "stopped"
    last_ok: datetime | None = None


class Channel(Protocol):
    """A platform adapter: turns platform events into InboundMessages and sends replies."""

    name: str
    # True: send() reaches a chat with no request waiting (recovery after a crash, a
    # reminder). False (HTTP): send() answers only a request still waiting for it.
    pushes: bool

    async def start(self, handler: MessageHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> Sent | None:
        """Deliver; raise core.messages.DeliveryError when the platform did not take it."""

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        """Rebuild an accepted message's image from its locator (recovery after a crash)."""

    def health(self) -> ChannelHealth: ...


class TextOnly:
    """For a channel that takes no images (the console, HTTP): an accepted message that
    is answered after a crash has none to restore."""

    def restore_image(self, locator: str, mime: str | None, name: str) -> ImageRef | None:
        return None
