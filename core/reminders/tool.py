"""`[Remind: <when> | <text>]`: the model sets a reminder for the person it talks to.

So "remind me tomorrow at 9 to call the bank" works in any language the model reads:
it turns the words into one of the `<when>` forms `/remind` takes (or an ISO time) and
the text. The reminder is always the sender's, in this chat, under the same rules and
limits as `/remind` (core/reminders/service.py); the observation is the same
confirmation line with the id, or the one-line refusal.
"""

from __future__ import annotations

from core.messages import InboundMessage
from core.reminders.service import Reminders
from core.tools.registry import Observation, Tool, ToolContext, ToolParam
from core.tools.words import worded_tool
from memory.reminders.types import ReminderRefused

WHEN_FORMS = (
    "in 20m, in 2h, at 09:00, tomorrow 09:00, 2026-12-01 14:30, an ISO time like "
    "2026-12-01T14:30:00+08:00, every day 09:00, every monday 09:00, every weekday 08:30, "
    'every 2h, cron "30 8 * * 1-5" (times are in the chat\'s time zone)'
)
USAGE = (
    "[Remind: <when> | <text>] - set a reminder for the person you are talking to, sent "
    f"in this chat at that time. <when> is one of: {WHEN_FORMS}."
)
# Native mode: the two parts as parameters of their own (joined back into "<when> | <text>").
PARAMS = (
    ToolParam("when", f"when to send it, one of: {WHEN_FORMS}"),
    ToolParam("text", "what to remind them of, e.g. 'take the pizza out'"),
)


def remind_tool(reminders: Reminders, *, enabled: bool = True) -> Tool:
    """Set a reminder for the turn's sender in the turn's chat."""

    async def handle(arg: str, ctx: ToolContext) -> Observation:
        message = ctx.extra.get("inbound")
        if not isinstance(message, InboundMessage):
            return Observation("Reminders are not available in this conversation.", ok=False)
        if message.scheduled:
            # a scheduled task must not re-create itself or others (the agent re-adding
            # a job someone deleted): only people set reminders
            return Observation("A scheduled task cannot set reminders.", ok=False)
        when, bar, text = arg.partition("|")
        if not bar or not when.strip() or not text.strip():
            return Observation("Write it as [Remind: <when> | <text>].", ok=False)
        try:
            done = await reminders.set_parts(message, when.strip(), text.strip())
        except ReminderRefused as refused:
            return Observation(f"Not set: {refused}.", ok=False)
        return Observation(f"{done.text} (tell the user it is set, with its id)")

    return worded_tool("remind", handle, usage=USAGE, params=PARAMS, enabled=enabled)
