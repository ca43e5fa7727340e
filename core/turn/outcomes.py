"""What a turn can end in besides a reply: the apologies users see and the two refusals
the channels act on. One vocabulary for the processor, the dispatcher and the wiring."""

from __future__ import annotations

APOLOGY = {
    "timeout": "Sorry, my language model took too long to answer. Please try again.",
    "rate_limited": "Sorry, I'm getting too many requests right now. Please try again in a minute.",
    "unavailable": "Sorry, I can't reach my language model right now. Please try again shortly.",
}
GENERIC_APOLOGY = "Sorry, something went wrong on my side. Please try again in a moment."


class ShuttingDown(Exception):
    """The message was accepted and will be answered after the restart."""


class Overloaded(Exception):
    """Too many turns in flight and waiting: the message was not accepted (nothing is
    stored); the caller is told to send it again later."""
