"""A reply shown while the model writes it: the seam between the turn path and a channel.

Why a seam of its own: the turn path knows when text appears and when the answer is
final; only the channel knows how to show a preview (a Telegram draft in a DM, one
message edited as it grows in a group) and how fast it may. The core never waits on
the platform while the model writes: `show` hands over the latest text and returns.

Crash safety: a channel that shows a preview in real messages calls `record` with a
small JSON-able dict naming them (for example `{"stream": {"message_ids": [...]}}`)
before it relies on them; the core stores it on the intake row. After a crash the
record comes back as `OutboundMessage.resume`, so the same messages are completed
instead of a second copy being sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from core.messages import OutboundMessage, Sent

# Stores the channel's record of the messages showing this reply (on the intake row).
StreamRecorder = Callable[[dict[str, Any]], Awaitable[None]]
# What the tool loop calls with the whole visible preview text so far.
PreviewSink = Callable[[str], Awaitable[None]]


class ReplyStream(Protocol):
    """One reply being shown as it grows; one per turn."""

    async def show(self, text: str) -> None:
        """The whole preview so far: it usually grows, and is replaced after a tool
        status line. Returns at once (the channel paces its own sends, may skip
        intermediate texts) and never raises: a preview that fails is only a preview."""

    async def finish(self, text: str) -> Sent:
        """Deliver `text` as the final reply, replacing the preview. Raises
        core.messages.DeliveryError when the platform did not take it."""


class StreamingOutlet(Protocol):
    """A channel that can show replies while they are written."""

    def open_stream(self, message: OutboundMessage, record: StreamRecorder) -> ReplyStream | None:
        """A stream for the reply `message` addresses (its text is empty), or None when
        this chat or configuration does not stream (the core then uses `send`).
        `message.resume` is a record from an earlier attempt that died mid-stream."""
