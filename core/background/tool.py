"""The model's `spawn` tool: `[Spawn: task]`, or a native function with a `task`.

Offered only to senders `[jobs] spawn_allow` lets start tasks, and never inside a task
itself (a task does not spawn tasks: `TASK_KEY` in the tool context marks one); the desk
checks the rule again when a call runs. The observation tells the model the answer
comes later by itself, and what to say now.
"""

from __future__ import annotations

from core.background.desk import TaskDesk, TaskRequest
from core.jobs.asking import asked_observation, asker_in
from core.tools.registry import Observation, Tool, ToolContext

TASK_KEY = "task_job"  # ToolContext.extra key: this context is a background task's


def request_of(task: str, ctx: ToolContext) -> TaskRequest:
    """The request for this turn's sender, in this turn's chat (never from the marker)."""
    return asker_in(TaskRequest, ctx, task=task)


def offered(desk: TaskDesk, ctx: ToolContext) -> bool:
    return TASK_KEY not in ctx.extra and desk.may_spawn(ctx)


def spawn_tool(desk: TaskDesk) -> Tool:
    async def spawn(task: str, ctx: ToolContext) -> Observation:
        if TASK_KEY in ctx.extra:
            return Observation("A background task cannot start another one.", ok=False)
        asked = await desk.ask(request_of(task, ctx))
        return asked_observation(
            asked, "is doing the task in the background (do not do it yourself now)"
        )

    return Tool(
        name="spawn",
        marker="Spawn",
        usage="[Spawn: the whole task, self-contained] — hand a task that needs many steps "
        "(reading several pages, comparing, summarising) to a background helper; its answer "
        "is sent to the chat by itself when done",
        description="Hand a task that needs many tool steps to a background helper; its "
        "answer is sent to the chat by itself when done.",
        handler=spawn,
        arg_attr="task",
        arg_description="the whole task, self-contained: the helper sees nothing else",
        result_tag="spawn_result",
        status="🔧 {arg}",
        offered_to=lambda ctx: offered(desk, ctx),
    )
