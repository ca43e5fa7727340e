"""Replies out to QQ: readable plain text, one merged-forward message when long, paced.

What a QQ user gets: the model's Markdown as plain text (QQ shows no formatting, so
`**`, `#`, fences and `[text](url)` would show as they are); a long answer as one
merged-forward message (a "chat history" card that opens to the whole text) instead of
a wall of messages, where the implementation offers `send_group_forward_msg` /
`send_private_forward_msg` (NapCat, go-cqhttp, Lagrange); otherwise the answer in
pieces cut at paragraph or sentence boundaries. Every send goes through the account's
paced queue (see pacing.py). Text always goes out as text segments, never CQ strings,
so nothing a user typed can turn into a CQ code.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

from cachetools import LRUCache

from channels.formatting.markdown import new_parser
from channels.formatting.plain import render_plain
from channels.formatting.split import split_text
from channels.onebot.actions import ActionFailed, ConnectionLost, OneBotError
from channels.onebot.connections import ConnectionRegistry, OneBotUnavailable
from channels.onebot.events import id_param, parse_chat_id
from channels.onebot.message import (
    Segment,
    at_segment,
    image_segment,
    reply_segment,
    text_segment,
)
from channels.onebot.pacing import SendPacer
from core.messages import DeliveryError, OutboundMessage, Sent

log = logging.getLogger(__name__)

QQ_TEXT_LIMIT = 4500
DM_REFUSED = (
    "I couldn't send you a private message. Please add me as a friend or message me "
    "directly first, then ask again there."
)
FORWARD_ACTIONS = {"group": "send_group_forward_msg", "private": "send_private_forward_msg"}
UPLOAD_ACTIONS = {"group": "upload_group_file", "private": "upload_private_file"}
# The implementation answers an upload only once QQ's servers took the whole file, which
# for a file of several MB takes far longer than an ordinary action.
UPLOAD_TIMEOUT_S = 120.0
# How implementations word "no such action" when they do not use retcode 1404
# (NapCat's HTTP server: retcode 200, "不支持的Api <action>").
_UNSUPPORTED_WORDS = ("unsupported", "not supported", "not implemented", "不支持", "不存在")

# Who wrote a message, by (account, message id): replies to the bot are recognised by it.
Authors: TypeAlias = LRUCache[tuple[str, str], str]


@dataclass(frozen=True)
class Destination:
    """Where one reply goes."""

    kind: str  # "group" or "private"
    number: str  # the group or QQ number
    reply_to: str | None = None  # quote this message (first piece only)
    temp_group: str | None = None  # a DM to a non-friend opens a temporary session here
    mention: str | None = None  # @ this member at the start (a reminder in a group)


def is_unsupported(exc: ActionFailed) -> bool:
    """The implementation has no such action (as opposed to: it failed this time)."""
    if str(exc.retcode) == "1404":
        return True
    message = exc.message.lower()
    return exc.action in message and any(word in message for word in _UNSUPPORTED_WORDS)


def forward_node(name: str, self_id: str, text: str) -> Segment:
    """One custom node of a merged-forward message, shown as sent by the bot.

    Both spellings of the sender: go-cqhttp and Lagrange read `name`/`uin` (a string for
    Lagrange), NapCat reads `nickname`/`user_id` (a number for its packet backend).
    """
    return {
        "type": "node",
        "data": {
            "name": name,
            "uin": self_id,
            "nickname": name,
            "user_id": id_param(self_id),
            "content": [text_segment(text)],
        },
    }


class Outbound:
    """Sends replies for the channel; every send is paced per account."""

    def __init__(
        self,
        registry: ConnectionRegistry,
        pacer: SendPacer,
        authors: Authors,
        *,
        forward_over_chars: int,
        on_sent: Callable[[], None],
        send_wait_s: float = 30.0,
    ) -> None:
        self._registry = registry
        self._pacer = pacer
        self._authors = authors
        self._forward_over = forward_over_chars  # 0: never as a forward message
        self._on_sent = on_sent
        self._send_wait_s = send_wait_s
        self._parser = new_parser()

    async def send(self, message: OutboundMessage, running: Callable[[], bool]) -> Sent:
        """Send anything the core sends (a reply, a command's answer, a notice). Waits
        (bounded) for an account to be connected, so it survives a reconnect;
        DeliveryError when it could not be sent (permanent when the chat id can never
        be addressed)."""
        try:
            kind, number = parse_chat_id(message.chat_id)
        except ValueError as exc:
            raise DeliveryError(f"onebot: {exc}", permanent=True) from None
        reply_to = message.reply_to_message_id
        mention = message.mention_user_id if kind == "group" else None
        destination = Destination(kind, number, reply_to=reply_to, mention=mention)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._send_wait_s
        while True:
            try:
                account = self._registry.account_for(message.chat_id)
                return Sent(tuple(await self._send_to(account, destination, message)))
            except OneBotUnavailable as exc:
                if not running() or loop.time() > deadline:
                    raise DeliveryError(f"onebot: {exc}") from None
                await asyncio.sleep(0.2)
            except OneBotError as exc:
                raise DeliveryError(f"onebot: {exc}") from exc

    async def react(self, message: OutboundMessage) -> bool:
        """A one-emoji answer as a reaction on the group message it answers: NapCat's
        `set_msg_emoji_like` (a Unicode emoji goes by its code point). False when this is
        no group, the emoji is more than one code point, or the implementation refused
        or lacks the action (go-cqhttp, Lagrange): the core sends the emoji as text."""
        emoji = (message.reaction or "").replace("\ufe0f", "")
        if len(emoji) != 1 or not message.react_to:
            return False
        try:
            kind, _number = parse_chat_id(message.chat_id)
            if kind != "group":
                return False  # QQ reacts in groups only
            account = self._registry.account_for(message.chat_id)
            params = {"message_id": id_param(message.react_to), "emoji_id": str(ord(emoji))}
            await self._pacer.send(
                account, partial(self._call, account, "set_msg_emoji_like", params)
            )
        except (ValueError, OneBotError, OneBotUnavailable) as exc:
            log.info("onebot: reaction in %s not set: %s", message.chat_id, exc)
            return False
        return True

    async def send_audio(self, message: OutboundMessage) -> Sent:
        """A spoken reply as one `record` segment (`base64://`, which the implementation
        encodes to SILK itself); sent after the text, never in place of it."""
        assert message.audio is not None
        kind, number = parse_chat_id(message.chat_id)
        destination = Destination(kind, number)
        encoded = base64.b64encode(message.audio).decode("ascii")
        segments: list[Segment] = [{"type": "record", "data": {"file": f"base64://{encoded}"}}]
        action, params = _message_params(destination, segments)
        try:
            account = self._registry.account_for(message.chat_id)
            data = await self._pacer.send(account, partial(self._call, account, action, params))
        except OneBotError as exc:
            raise DeliveryError(f"onebot: {exc}") from None
        return Sent(tuple(self._note_sent(account, data)))

    async def _send_to(
        self, account: str, destination: Destination, message: OutboundMessage
    ) -> list[str]:
        """The model's Markdown is rendered; our own texts (a /context report's
        indentation, a remembered fact's `*`) are sent as written. A private answer goes
        to the person's DM, or the group is told that QQ refused it."""
        if message.image is not None:
            return await self._send_picture(account, destination, message.image, message.text)
        if message.document is not None:
            name = message.document_name or "file"
            await self.upload_file(account, destination, message.document, name)
            return []  # an upload answers with no message id
        person = message.private_to
        if person is not None and destination.kind == "group":
            dm = Destination("private", person.user_id, temp_group=destination.number)
            try:
                return await self.send_text(account, dm, message.text)
            except OneBotUnavailable:
                raise
            except OneBotError as exc:
                log.info(
                    "onebot[%s]: DM to %s refused (%s); saying so in the group",
                    account,
                    person.user_id,
                    exc,
                )
                return await self.send_text(account, destination, DM_REFUSED)
        return await self.send_text(account, destination, message.text, markdown=not message.plain)

    # -- one reply -------------------------------------------------------------------

    async def send_text(
        self, account: str, destination: Destination, text: str, *, markdown: bool = False
    ) -> list[str]:
        """Send `text` (rendered first when it is the model's Markdown) as one forward
        message or in pieces; the sent message ids. OneBotUnavailable only when nothing
        was sent (so the whole reply may be retried)."""
        if markdown and text.strip():
            text = render_plain(text, self._parser)
        if self._forward_over and len(text) > self._forward_over and not destination.mention:
            sent = await self._as_forward(account, destination, text)
            if sent is not None:
                return sent
        return await self._in_pieces(account, destination, text)

    async def _send_picture(
        self, account: str, destination: Destination, image: bytes, caption: str
    ) -> list[str]:
        """One message: the picture (an `image` segment) and its caption below it."""
        segments: list[Segment] = []
        if destination.reply_to:
            segments.append(reply_segment(destination.reply_to))
        if destination.mention:
            segments.append(at_segment(destination.mention))
        segments.append(image_segment(image))
        if caption.strip():
            segments.append(text_segment(caption[:QQ_TEXT_LIMIT]))
        return self._note_sent(account, await self._send_segments(account, destination, segments))

    async def upload_file(
        self, account: str, destination: Destination, data: bytes, name: str
    ) -> None:
        """A file as a QQ file (`upload_group_file` / `upload_private_file`), inline as
        `base64://` so the implementation needs no path it shares with the daemon. NapCat
        reads that; one that takes local paths only (go-cqhttp) refuses it, and the run's
        result tells the model the file could not be sent."""
        action = UPLOAD_ACTIONS[destination.kind]
        key = "group_id" if destination.kind == "group" else "user_id"
        encoded = base64.b64encode(data).decode("ascii")
        params = {key: id_param(destination.number), "file": f"base64://{encoded}", "name": name}

        async def run() -> Any:
            live = self._registry.live(account)
            result = await live.actions.call(action, params, timeout_s=UPLOAD_TIMEOUT_S)
            self._on_sent()
            return result

        await self._pacer.send(account, run)

    async def _send_segments(
        self, account: str, destination: Destination, segments: list[Segment]
    ) -> Any:
        """One message; a quote of a message QQ no longer has (recalled, or too old) makes
        the implementation refuse the whole send, so it goes again once without the quote."""
        action, params = _message_params(destination, segments)
        try:
            return await self._pacer.send(account, partial(self._call, account, action, params))
        except ActionFailed as exc:
            if not segments or segments[0].get("type") != "reply":
                raise
            log.info("onebot[%s]: %s; sending it without the quote", account, exc)
        action, params = _message_params(destination, segments[1:])
        return await self._pacer.send(account, partial(self._call, account, action, params))

    async def _in_pieces(self, account: str, destination: Destination, text: str) -> list[str]:
        pieces = split_text(text, QQ_TEXT_LIMIT) if text else []
        sent: list[str] = []
        for index, piece in enumerate(pieces):
            segments: list[Segment] = []
            if index == 0 and destination.reply_to:
                segments.append(reply_segment(destination.reply_to))
            if index == 0 and destination.mention:
                segments.append(at_segment(destination.mention))
                piece = f" {piece}"
            segments.append(text_segment(piece))
            try:
                data = await self._send_segments(account, destination, segments)
            except OneBotUnavailable:
                if index == 0:
                    raise
                action = _message_params(destination, segments)[0]
                raise ConnectionLost(
                    f"{action}: connection gone after {index} of {len(pieces)} parts"
                ) from None
            sent.extend(self._note_sent(account, data))
        return sent

    async def _as_forward(
        self, account: str, destination: Destination, text: str
    ) -> list[str] | None:
        """One merged-forward message; None when the reply should go in pieces instead."""
        conn = self._registry.live(account)
        if conn.forward_supported is False or conn.self_id is None:
            return None
        self_id, name = conn.self_id, conn.nickname or conn.self_id
        nodes = [forward_node(name, self_id, piece) for piece in split_text(text, QQ_TEXT_LIMIT)]
        action = FORWARD_ACTIONS[destination.kind]
        params: dict[str, Any] = {"messages": nodes}
        if destination.kind == "group":
            params["group_id"] = id_param(destination.number)
        else:
            params["user_id"] = id_param(destination.number)
            if destination.temp_group is not None:
                params["group_id"] = id_param(destination.temp_group)

        async def run() -> Any:
            live = self._registry.live(account)
            try:
                data = await live.actions.call(action, params)
            except ActionFailed as exc:
                if is_unsupported(exc):
                    live.forward_supported = False
                raise
            live.forward_supported = True
            self._on_sent()
            return data

        try:
            data = await self._pacer.send(account, run)
        except ActionFailed as exc:
            if is_unsupported(exc):
                log.info(
                    "onebot[%s]: no %s here (%s); long replies go in parts", account, action, exc
                )
            else:
                log.warning("onebot[%s]: %s; sending the reply in parts", account, exc)
            return None
        return self._note_sent(account, data)

    async def _call(self, account: str, action: str, params: dict[str, Any]) -> Any:
        # The connection is looked up when the send's turn comes: it may have been
        # replaced (a reconnect) while the send waited in the queue.
        data = await self._registry.live(account).actions.call(action, params)
        self._on_sent()
        return data

    def _note_sent(self, account: str, data: Any) -> list[str]:
        if not isinstance(data, dict) or data.get("message_id") is None:
            return []
        message_id = str(data["message_id"])
        if not account.startswith("?"):
            self._authors[(account, message_id)] = account
        return [message_id]


def _message_params(
    destination: Destination, segments: list[Segment]
) -> tuple[str, dict[str, Any]]:
    if destination.kind == "group":
        return "send_group_msg", {"group_id": id_param(destination.number), "message": segments}
    params: dict[str, Any] = {"user_id": id_param(destination.number), "message": segments}
    if destination.temp_group is not None:  # lets go-cqhttp/NapCat open a temporary session
        params["group_id"] = id_param(destination.temp_group)
    return "send_private_msg", params
