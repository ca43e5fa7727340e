"""Sending a request the reply already stored for its message (a retried HTTP request,
or one that another replica answered first).

Why apart from the processor: waiting, bounded, for another process's answer to land
in the intake is one job; the processor only says which row to read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from core.messages import InboundMessage
from core.turn.accepted import reply_for
from core.turn.delivery import Outbox
from core.turn.outcomes import ShuttingDown
from memory.turns.types import IntakeEntry, Store

DUPLICATE_WAIT_S = 120.0  # how long a retried message waits for the first try's answer


async def send_stored_reply(
    store: Store,
    outbox: Outbox,
    message: InboundMessage,
    read: Callable[[], Awaitable[IntakeEntry | None]],
    closing: Callable[[], bool],
) -> None:
    """Wait (bounded) for the intake row's stored reply and send it to the request
    waiting for it; nothing when the row failed or expired, or the wait ran out.
    Raises ShuttingDown when the daemon stops meanwhile (the caller retries)."""
    deadline = asyncio.get_running_loop().time() + DUPLICATE_WAIT_S
    delay = 0.05
    while True:
        entry = await read()
        if entry is None or entry.state in ("failed", "expired"):
            return
        if entry.state in ("answered", "delivered") and entry.reply_turn_id is not None:
            reply = await store.turn_content(entry.reply_turn_id)
            if reply is not None:
                await outbox.deliver(entry.id, reply_for(message, reply.content, late=False))
                return
        if closing():
            raise ShuttingDown
        if asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
