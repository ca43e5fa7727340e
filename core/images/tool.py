"""The model's `draw` tool: `[Draw: prompt]`, or a native function with a `prompt`.

Offered only to senders the `[images] allow` rule lets draw (Tool.offered_to: the tool is
not in anyone else's request at all), and the desk checks the rule again when a call
runs. The observation tells the model the picture comes later by itself, and what to
say now.
"""

from __future__ import annotations

from core.images.desk import DrawDesk, DrawRequest
from core.jobs.asking import asked_observation, asker_in
from core.tools.registry import Observation, Tool, ToolContext
from core.tools.words import worded_tool


def request_of(prompt: str, ctx: ToolContext) -> DrawRequest:
    """The request for this turn's sender, in this turn's chat (never from the marker)."""
    return asker_in(DrawRequest, ctx, prompt=prompt)


def draw_tool(desk: DrawDesk) -> Tool:
    async def draw(prompt: str, ctx: ToolContext) -> Observation:
        asked = await desk.ask(request_of(prompt, ctx))
        return asked_observation(asked, "is drawing the picture (in a minute or so)")

    return worded_tool("draw", draw, offered_to=lambda ctx: desk.may_draw(ctx))
