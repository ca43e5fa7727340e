"""What the user sees before the answer: "typing…", the growing text, an ack reaction.

Why these belong together: each one is shown only while the others are not. "typing…"
is for a reply that shows no text yet; once a draft or preview message appears it stops.
The ack reaction (`[telegram] ack_reaction`) marks a group message whose answer is slow
to appear, and goes away when the answer is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from channels.telegram.outbound import TelegramSender
from core.clock import Clock

log = logging.getLogger(__name__)

# Where in Telegram: a chat id and its forum topic (None: the chat itself). Not a
# ChatKey (memory.turns.types), which names a chat across platforms.
Place = tuple[int, int | None]


class Presence:
    """Chats (and topics) where a reply's text is showing right now.

    A stream marks its chat each time it shows text and unmarks it when it finishes;
    a mark older than `ttl_s` no longer counts, so a stream that was abandoned (a turn
    that failed after it started) cannot silence "typing…" in its chat for good.
    """

    def __init__(self, clock: Clock, ttl_s: float = 30.0) -> None:
        self._clock = clock
        self._ttl_s = ttl_s
        self._last: dict[Place, float] = {}

    def shown(self, key: Place) -> None:
        self._last[key] = self._clock.monotonic()

    def ended(self, key: Place) -> None:
        self._last.pop(key, None)

    def showing(self, key: Place) -> bool:
        at = self._last.get(key)
        if at is None:
            return False
        if self._clock.monotonic() - at > self._ttl_s:
            del self._last[key]
            return False
        return True


class AckReaction:
    """Reacts to a triggering message when no text of the answer showed within
    `delay_s`; takes the reaction back when the answer is out. Failures only logged."""

    def __init__(
        self,
        sender: TelegramSender,
        clock: Clock,
        presence: Presence,
        *,
        emoji: str,
        delay_s: float,
    ) -> None:
        self._sender = sender
        self._clock = clock
        self._presence = presence
        self._emoji = emoji
        self._delay_s = delay_s
        self._answered: set[tuple[int, int]] = set()  # (chat, message) answered by a reaction

    @contextlib.asynccontextmanager
    async def around(self, key: Place, message_id: int) -> AsyncIterator[None]:
        """While the body answers the message: react if it is slow, unreact at the end."""
        reacted = asyncio.Event()
        task = asyncio.create_task(self._later(key, message_id, reacted))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.wait({task})
            answered = (key[0], message_id) in self._answered
            self._answered.discard((key[0], message_id))
            if reacted.is_set() and not answered:
                await self._sender.react(key[0], message_id, None)

    def answered(self, chat_id: int, message_id: int) -> None:
        """The answer to this message was our reaction (it replaced the ack): the ack is
        not taken back, or the answer would go with it."""
        self._answered.add((chat_id, message_id))

    async def _later(self, key: Place, message_id: int, reacted: asyncio.Event) -> None:
        await self._clock.sleep(self._delay_s)
        if self._presence.showing(key):
            return  # the answer is already appearing: nothing to acknowledge
        reacted.set()  # before the request: one cut short by the answer is still undone
        if not await self._sender.react(key[0], message_id, self._emoji):
            reacted.clear()
