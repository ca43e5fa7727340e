"""The one door out: every message the bot sends leaves through here.

Model replies, command answers, notices, apologies and messages nobody asked for at
that moment (reminders) are all an OutboundMessage handed to the `Outbox`, which finds
the chat's channel (`ChannelRoutes`), sends, and records what was sent: a turn's reply
is `delivered` on its intake row only once the platform confirmed it, anything else is
logged with the platform's message ids.

Why the core sends instead of handing the reply back up to the channel: recovery must
be able to send a reply whose original request is long gone (after a crash, on another
replica), and the next features (voice replies, reminders, files) have no request to
answer at all. One door keeps every send on the same channel code and the same rules.
A channel that answers in its response (HTTP) pairs each waiting request with the
message sent for it (`OutboundMessage.request_id`).
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any, Protocol

from core.messages import (
    Attachment,
    DeliveryError,
    ImageRef,
    InboundMessage,
    OutboundMessage,
    Sent,
)
from core.streaming import ReplyStream, StreamRecorder
from memory.turns.types import Intake

log = logging.getLogger(__name__)


class Outlet(Protocol):
    """The part of a channel the core needs: send, and rebuild an image from its locator.

    `pushes`: the channel can reach a chat when no request of it is waiting (Telegram,
    QQ, the console; HTTP only with a push target)."""

    name: str
    pushes: bool

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

    def outlet(self, platform: str) -> Outlet | None:
        """The started channel of `platform`, for what only some channels do (moderation)."""
        return self._outlets.get(platform)

    def can_push(self, platform: str) -> bool:
        """A message nobody is waiting for can reach this platform's chats."""
        outlet = self._outlets.get(platform)
        return outlet is not None and outlet.pushes

    def merges_bursts(self, platform: str) -> bool:
        """Quick messages of one sender here may be answered as one turn: the channel
        pushes replies (no request waits for each answer) and does not hand messages
        over one at a time, each after the last one's answer (`one_at_a_time`: the
        console, where a merge window would only delay every answer)."""
        outlet = self._outlets.get(platform)
        alone = getattr(outlet, "one_at_a_time", False)
        return self.can_push(platform) and not alone

    def takes_proactive(self, platform: str) -> bool:
        """A message nobody asked for can reach this platform: it pushes, or it has a
        push target for such messages (HTTP with `[http] push_url`)."""
        outlet = self._outlets.get(platform)
        return outlet is not None and (outlet.pushes or getattr(outlet, "push", None) is not None)

    async def deliver(self, message: OutboundMessage) -> Sent:
        """Send through the message's channel; DeliveryError when it cannot be sent now."""
        outlet = self._outlets.get(message.platform)
        if outlet is None:
            raise DeliveryError(f"no {message.platform} channel is running")
        if message.image is not None and not getattr(outlet, "shows_images", False):
            message = without_image(message)
        return await outlet.send(message) or Sent()

    def working(self, message: InboundMessage) -> AbstractAsyncContextManager[None]:
        """While the daemon makes an answer to `message`: what its channel shows for
        that (Telegram: "typing…", a slow group answer's ack reaction), if anything."""
        outlet = self._outlets.get(message.platform)
        shows = getattr(outlet, "working", None)
        return shows(message) if shows is not None else contextlib.nullcontext()

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

    async def react(self, outbound: OutboundMessage) -> bool:
        """The answer as a reaction through the channel's optional `react`; False when it
        has none or the platform refused it (the caller sends the text instead)."""
        react = getattr(self._outlets.get(outbound.platform), "react", None)
        return bool(await react(outbound)) if callable(react) else False

    async def send_audio(self, outbound: OutboundMessage) -> Sent | None:
        """A spoken reply through the channel's optional `send_audio`; None: it has none."""
        send = getattr(self._outlets.get(outbound.platform), "send_audio", None)
        return await send(outbound) if callable(send) else None

    def restore_attachment(self, platform: str, stub: Attachment) -> Attachment | None:
        """A document or voice note fetchable again, for channels that can (optional)."""
        restore = getattr(self._outlets.get(platform), "restore_attachment", None)
        return restore(stub) if callable(restore) else None


NO_PICTURES_NOTE = "(A picture was drawn for this, but this chat cannot show pictures.)"


def without_image(message: OutboundMessage) -> OutboundMessage:
    """A picture's message for a channel that shows no pictures (HTTP push, the console):
    its caption, and a note saying a picture was drawn."""
    text = f"{message.text}\n\n{NO_PICTURES_NOTE}" if message.text.strip() else NO_PICTURES_NOTE
    return replace(message, image=None, text=text, plain=True)


class Outbox:
    """Every message on its way out, and the record of what was sent.

    Why one class for replies, notices and proactive messages: a reply is `delivered`
    only once the platform confirmed it, a preview's messages are recorded on the row
    while it streams, and the live path, recovery, commands and reminders all send
    through here, so all of them meet the same channel code and keep the same rules.
    """

    def __init__(self, routes: ChannelRoutes | None, intake: Intake) -> None:
        self._routes = routes
        self._intake = intake

    def merges_bursts(self, platform: str) -> bool:
        """See ChannelRoutes.merges_bursts."""
        return self._routes is not None and self._routes.merges_bursts(platform)

    def pushes(self, platform: str) -> bool:
        """This platform's chats can be sent a message nobody is waiting for (False:
        HTTP, where a reply whose request is gone is read by the caller's retry)."""
        return self._routes is not None and self._routes.can_push(platform)

    def working(self, message: InboundMessage) -> AbstractAsyncContextManager[None]:
        """Shown in the chat while an answer to `message` is made (the dispatcher's
        decision that it will be answered; see ChannelRoutes.working)."""
        if self._routes is None:
            return contextlib.nullcontext()
        return self._routes.working(message)

    def open_stream(self, entry_id: int, target: OutboundMessage) -> ReplyStream | None:
        """A preview of the reply while it is written, where the channel shows one; the
        channel's record of its messages goes on the row, so a crash mid-stream is
        finished in those same messages (`target.resume` next time), not in a copy."""
        if self._routes is None:
            return None

        async def record(delivery: dict[str, Any]) -> None:
            await self._intake.note_delivery(entry_id, delivery)

        return self._routes.open_stream(target, record)

    async def deliver(
        self, entry_id: int, outbound: OutboundMessage, stream: ReplyStream | None = None
    ) -> bool:
        """Send (or finish the preview with) a turn's reply; the row becomes `delivered`
        once the platform confirmed it, `failed` when it can never be delivered. False:
        not delivered now; recovery tries again (HTTP: the caller's retry reads it)."""
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
            later = (
                "recovery will try again"
                if self.pushes(outbound.platform)
                else ("kept for the caller's retry")
            )
            log.warning(
                "reply to %s:%s not delivered yet (%s); %s",
                outbound.platform,
                outbound.chat_id,
                exc,
                later,
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
        routes = self._routes
        if (
            routes is not None
            and routes.can_send(outbound.platform)
            and not routes.takes_proactive(outbound.platform)
        ):
            raise DeliveryError(
                f"{outbound.platform} chats can only be answered, not sent to: the channel "
                "replies in its responses and has no push target",
                permanent=True,
            )
        return await self._send(outbound, None)

    async def tell(self, outbound: OutboundMessage, stream: ReplyStream | None = None) -> bool:
        """Best effort, for a message no state waits on (a command's answer, a notice,
        an apology): a failure is logged, never raised. True when it was sent."""
        try:
            sent = await self._send(outbound, stream)
        except DeliveryError as exc:
            log.warning(
                "message to %s:%s not delivered: %s", outbound.platform, outbound.chat_id, exc
            )
            return False
        log.debug(
            "sent to %s:%s as %s", outbound.platform, outbound.chat_id, list(sent.message_ids)
        )
        return True

    async def _send(self, outbound: OutboundMessage, stream: ReplyStream | None) -> Sent:
        if await self._reacted(outbound, stream):
            return Sent()  # settled like a reply: the reaction is the answer
        if stream is not None:
            sent = await stream.finish(outbound.text)
        elif self._routes is None:
            raise DeliveryError(f"no {outbound.platform} channel is running")
        else:
            sent = await self._routes.deliver(outbound)
        if outbound.audio is not None:
            await self._send_audio(outbound)
        return sent

    async def _reacted(self, outbound: OutboundMessage, stream: ReplyStream | None) -> bool:
        """A one-emoji answer as a reaction, when no preview of it shows as a message
        already and the channel can react; False: send it as text."""
        if outbound.reaction is None or outbound.react_to is None or self._routes is None:
            return False
        if stream is not None:
            # A preview message already out is finished, never left behind: only a
            # stream that says it shows nothing (and can stop) gives way to a reaction.
            close = getattr(stream, "close", None)
            if getattr(stream, "showing", True) or close is None:
                return False
            await close()
        return await self._routes.react(outbound)

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
