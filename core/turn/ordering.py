"""One turn at a time per chat, many chats at once, every task accounted for."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from core.fairness import FairLimiter
from memory.chats.types import ChatKey

log = logging.getLogger(__name__)


class ChatSerializer:
    """Per-chat FIFO queues plus one global bound on turns in flight.

    Why: a chat's turns must see each other in order (the second message's context
    contains the first reply), while unrelated chats must not wait on each other; the
    global bound keeps a burst of chats from opening a model call each at once.
    A place in the queue is taken with `reserve()` without awaiting anything, so the
    order is the order messages arrived in, even when work that comes before the wait
    (the durable intake write) finishes in another order. Queues are created on demand
    and forgotten when idle, so memory stays bounded by the chats with work in flight.
    """

    def __init__(self, max_in_flight: int, per_source: int | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        # One sender's turns (across all their chats) hold at most `per_source` of the
        # global slots, so their hung turns cannot make every other chat wait.
        self._limit = FairLimiter(max_in_flight, per_source or max_in_flight)
        self._queues: dict[ChatKey, deque[asyncio.Future[None]]] = {}
        self._places = 0  # places taken and not yet left: turns in flight plus waiting

    def reserve(self, chat_key: ChatKey, source_key: str | None = None) -> ChatTicket:
        """Take the next place in this chat's queue now; `async with` it to wait for it.
        `source_key` (the sender) is bounded per source when the turn runs."""
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._queues.setdefault(chat_key, deque())
        if not queue:
            place.set_result(None)
        queue.append(place)
        self._places += 1
        return ChatTicket(self, chat_key, place, source_key)

    @asynccontextmanager
    async def turn(self, chat_key: ChatKey) -> AsyncIterator[None]:
        async with self.reserve(chat_key):
            yield

    def busy(self, chat_key: ChatKey) -> bool:
        """A turn of this chat is in flight or waiting here."""
        return chat_key in self._queues

    @property
    def active_chats(self) -> int:
        return len(self._queues)

    @property
    def places(self) -> int:
        """Turns holding a place here: in flight, or waiting for their chat or a slot."""
        return self._places

    def _leave(self, chat_key: ChatKey, place: asyncio.Future[None]) -> None:
        queue = self._queues[chat_key]
        queue.remove(place)
        self._places -= 1
        if not queue:
            del self._queues[chat_key]
        elif not queue[0].done():
            queue[0].set_result(None)  # the next in line goes


class ChatTicket:
    """One place in a chat's queue: held from `reserve()` until left or released."""

    def __init__(
        self,
        serial: ChatSerializer,
        chat_key: ChatKey,
        place: asyncio.Future[None],
        source_key: str | None = None,
    ):
        self._serial = serial
        self._chat_key = chat_key
        self._place = place
        self._keys = (f"source:{source_key}",) if source_key else ()
        self._slot: AbstractAsyncContextManager[None] | None = None
        self._left = False

    async def __aenter__(self) -> None:
        try:
            await self._place
            slot = self._serial._limit.slot(*self._keys)
            await slot.__aenter__()
            self._slot = slot
        except BaseException:
            self.release()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            if self._slot is not None:
                await self._slot.__aexit__(None, None, None)
        finally:
            self.release()

    def release(self) -> None:
        """Give the place up (also when it was never waited for); idempotent."""
        if not self._left:
            self._left = True
            self._serial._leave(self._chat_key, self._place)
