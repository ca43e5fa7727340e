"""The daemon's way out, for channel tests whose handler is a fake.

A fake handler answers a message with a `Reply` as a command would; the daemon's
dispatcher then sends that through the one door out (core/turn/delivery.py) to the channel
under test. `Door` does exactly that with the real Outbox, so a channel test sees the
same sends the daemon would make.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Protocol, cast

from core.messages import InboundMessage, Reply
from core.turn.accepted import notice_for
from core.turn.delivery import ChannelRoutes, Outbox, Outlet
from memory.turns.types import Intake


class Answering(Protocol):
    door: Door

    async def __call__(self, message: Any) -> Any: ...


class Door:
    """The Outbox over one channel; `answer` is the dispatcher's `_answer`, `working`
    what the dispatcher shows while it answers a message its policy (`answers`, every
    message unless a test sets the daemon's trigger policy) accepted."""

    def __init__(self) -> None:
        self._routes = ChannelRoutes()
        self._outbox = Outbox(self._routes, cast(Intake, None))  # tell() never needs it
        self.answers: Callable[[InboundMessage], bool] = lambda message: True

    def working(self, message: InboundMessage) -> AbstractAsyncContextManager[None]:
        if not self.answers(message):
            return nullcontext()
        return self._outbox.working(message)

    def attach(self, channel: Outlet) -> None:
        self._routes.add(channel)

    async def answer(self, message: InboundMessage, answer: object) -> None:
        if isinstance(answer, Reply) and answer.text.strip():
            await self._outbox.tell(notice_for(message, answer.text, private=answer.private))


async def start_answering(channel: Any, handler: Answering) -> None:
    """Start `channel` with `handler`, whose answers go out through `channel`'s send()."""
    handler.door.attach(channel)
    await channel.start(handler)
