"""The model's `draw` tool: `[Draw: prompt]`, or a native function with a `prompt`.

Offered only to senders the `[images] allow` rule lets draw (Tool.offered_to: the tool is
not in anyone else's request at all), and the desk checks the rule again when a call
runs. The observation tells the model the picture comes later by itself, and what to
say now.
"""

from __future__ import annotations

from core.images.desk import DrawDesk, DrawRequest
from core.messages import InboundMessage
from core.tools.registry import Observation, Tool, ToolContext
from core.tools.words import worded_tool


def request_of(prompt: str, ctx: ToolContext) -> DrawRequest:
    """The request for this turn's sender, in this turn's chat (never from the marker)."""
    inbound = ctx.extra.get("inbound")
    message = inbound if isinstance(inbound, InboundMessage) else None
    return DrawRequest(
        platform=ctx.platform,
        chat_id=ctx.chat_id,
        chat_type=str(message.chat_type) if message is not None else "private",
        user_id=ctx.user_id,
        name=ctx.display_name,
        prompt=prompt,
        thread_id=message.thread_id if message is not None else None,
        # a scheduled turn's id is ours, not the platform's: its answer quotes nothing
        message_id=message.message_id if message and not message.scheduled else None,
    )


def draw_tool(desk: DrawDesk) -> Tool:
    async def draw(prompt: str, ctx: ToolContext) -> Observation:
        asked = await desk.ask(request_of(prompt, ctx))
        if asked.job_id is None:
            return Observation(f"{asked.line} Tell the user so in one line.", ok=False)
        return Observation(
            f"Job #{asked.job_id} is drawing the picture; it will be sent to this chat by "
            f"itself when it is ready (in a minute or so). Say now, in one short line: "
            f"{asked.line}"
        )

    return worded_tool("draw", draw, offered_to=lambda ctx: desk.may_draw(ctx.sender_key))
