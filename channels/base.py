"""The seam between the daemon and every chat platform."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from core.messages import InboundMessage, OutboundMessage, Reply

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

    async def start(self, handler: MessageHandler) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...

    def health(self) -> ChannelHealth: ...
