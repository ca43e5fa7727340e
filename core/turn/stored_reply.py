"""Sending a request the reply already stored for its message (a retried HTTP request,
or one that another replica answered first).

Why apart from the processor: waiting, bounded, for another process's answer to land
in the intake is one job; the processor only says which row to read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from core.messages import InboundMessage
from core.turn.accepted import reply_for, restored_message
from core.turn.delivery import ChannelRoutes, Outbox
from core.turn.outcomes import ShuttingDown
from memory.turns.types import IntakeEntry, Store

log = logging.getLogger(__name__)

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


async def send_duplicates_reply(
    store: Store, outbox: Outbox, message: InboundMessage, closing: Callable[[], bool]
) -> None:
    """A re-delivered message: nothing new is answered. Where a reply whose request is
    gone cannot be pushed (HTTP), the retry is sent the first try's stored reply."""
    if outbox.pushes(message.platform) or message.message_id is None:
        log.info(
            "duplicate delivery of %s message %s ignored", message.chat_key, message.message_id
        )
        return
    platform, chat_id, message_id = message.platform, message.chat_id, message.message_id
    read = lambda: store.intake.by_message(platform, chat_id, message_id)  # noqa: E731
    await send_stored_reply(store, outbox, message, read, closing)


async def send_elsewheres_reply(
    store: Store,
    outbox: Outbox,
    entry: IntakeEntry,
    message: InboundMessage,
    closing: Callable[[], bool],
) -> None:
    """Someone else settled this message first (another replica's recovery took it while
    it waited here for a place). A caller waiting for the reply in its response (HTTP) is
    sent that answer, never an empty one; a pushing channel gets nothing more."""
    if not outbox.pushes(message.platform):
        await send_stored_reply(store, outbox, message, lambda: store.intake.get(entry.id), closing)


async def send_answered_reply(
    store: Store, outbox: Outbox, routes: ChannelRoutes | None, entry: IntakeEntry
) -> bool:
    """Send an `answered` reply that never went out (its process died first), under the
    chat's lock so no live turn of the chat is overtaken. False: skipped."""
    if entry.reply_turn_id is None:
        return False
    async with store.try_chat_lock(entry.platform, entry.chat_id) as free:
        if not free:
            return False
        fresh = await store.intake.get(entry.id)
        reply = await store.turn_content(entry.reply_turn_id)
        if fresh is None or fresh.state != "answered" or reply is None:
            return fresh is not None and fresh.state != "answered"
        message = restored_message(entry, routes)
        outbound = reply_for(message, reply.content, late=True)
        return await outbox.deliver(entry.id, replace(outbound, resume=fresh.delivery or None))
