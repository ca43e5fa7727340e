"""The task job: a background helper's own tool loop, checkpointed after every step.

Why its own room: a task runs minutes after its turn, so the rules a turn gets from its
processor are set here: the requester's tool context (their permissions, checked again
on every call; their memory only, never another chat's history), steps capped at
`[jobs] max_steps`, tokens at `[jobs] max_tokens` (counted to the requester). Each step's
turns go into the job's checkpoint, so a killed process resumes from the last stored
step. A task cut short says so with what it has, never "done".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from core.background.tool import TASK_KEY
from core.context.history_views import turn_message
from core.jobs.runner import JobContext, JobHandler, JobOutcome
from core.knowledge.citations import CITATIONS_KEY, Citations
from core.tools.loop import LoopResult, RoundHooks, TurnDraft, Usage
from core.tools.registry import ToolContext
from memory.jobs.types import Job
from memory.memories.types import MemoryStore

log = logging.getLogger(__name__)


class TaskLoop(Protocol):
    """The tool loop a task runs (core.tools.loop.ToolLoop)."""

    def guide_for(self, ctx: ToolContext) -> str: ...

    async def run(
        self,
        messages: list[dict[str, Any]],
        ctx: ToolContext,
        preview: None = None,
        hooks: RoundHooks | None = None,
    ) -> LoopResult: ...


@dataclass(frozen=True)
class TaskLimits:
    max_steps: int = 12  # [jobs] max_steps
    max_tokens: int = 60000  # [jobs] max_tokens
    bot_name: str = "the bot"


def task_context(
    job: Job, memory: MemoryStore | None, citations: Citations | None = None
) -> ToolContext:
    """The requester's context in the requester's chat: whose permissions and memory, and
    one citation numbering for every step of the task (its `knowledge` calls)."""
    return ToolContext.for_person(
        job.platform,
        job.chat_id,
        job.requester_id,
        job.requester_name,
        memory,
        **{TASK_KEY: job.id, CITATIONS_KEY: citations or Citations()},
    )


def opening(job: Job, limits: TaskLimits, guide: str) -> list[dict[str, Any]]:
    """The helper's instructions and its task (the requester's words, as a user message)."""
    system = (
        f"You are {limits.bot_name}, working in the background on task #{job.id} for "
        f"{job.requester_name or 'a user'}. Use the tools, one step at a time, to do the task "
        f"(at most {limits.max_steps} tool rounds). Then write the final answer: it is sent "
        f"to the chat as you write it, so make it complete and say plainly what you could "
        f"not find."
    )
    if guide:
        system = f"{system}\n\n{guide}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": str(job.args.get("task") or "")},
    ]


def _stored(turn: TurnDraft) -> dict[str, Any]:
    return {"role": turn.role, "kind": turn.kind, "content": turn.content, "meta": turn.meta}


def task_handler(loop: TaskLoop, memory: MemoryStore | None, limits: TaskLimits) -> JobHandler:
    """The runner's handler for jobs of kind "task" (args: {"task": ...})."""

    async def run_task(job: Job, context: JobContext) -> JobOutcome:
        done: list[dict[str, Any]] = list(context.progress.get("turns") or [])
        shown = [t["content"] for t in done if isinstance(t.get("content"), str)]
        ctx = task_context(job, memory, Citations.continuing(shown))
        steps0 = int(context.progress.get("steps") or 0)
        tokens0 = int(context.progress.get("tokens") or 0)
        if done:
            log.info("jobs: task #%d resumes after step %d", job.id, steps0)
        messages = opening(job, limits, loop.guide_for(ctx))
        messages += [turn_message(t["role"], t["content"], t.get("meta")) for t in done]
        state = {"steps": steps0, "tokens": tokens0, "budget": False}

        def spent(usage: Usage) -> int:
            return tokens0 + usage.prompt_tokens + usage.completion_tokens

        def enough(usage: Usage) -> bool:
            state["budget"] = spent(usage) >= limits.max_tokens
            return bool(state["budget"])

        async def after_round(turns: list[TurnDraft], usage: Usage) -> None:
            done.extend(_stored(turn) for turn in turns)
            state["steps"] = int(state["steps"]) + 1
            state["tokens"] = spent(usage)
            await context.checkpoint(turns=done, steps=state["steps"], tokens=state["tokens"])

        hooks = RoundHooks(
            rounds=max(0, limits.max_steps - steps0), after_round=after_round, enough=enough
        )
        result = await loop.run(messages, ctx, None, hooks)
        tokens = tokens0 + result.usage.prompt_tokens + result.usage.completion_tokens
        steps = int(state["steps"])
        return JobOutcome(
            outcome_text(job, result, steps, limits, budget=bool(state["budget"])),
            state="failed" if result.gave_up else "done",
            result={"steps": steps, "tokens": tokens},
            cost_tokens=tokens,
        )

    return run_task


def outcome_text(
    job: Job, result: LoopResult, steps: int, limits: TaskLimits, *, budget: bool
) -> str:
    """What the chat is told: the answer, and plainly whether the task was cut short."""
    cut = ""
    if budget:
        key = f"[jobs] max_tokens = {limits.max_tokens}"
        cut = f"used up its token budget ({key}) after {steps} steps"
    elif result.out_of_rounds or steps >= limits.max_steps:
        cut = f"ran out of steps after {steps}"
    if cut and result.gave_up:
        return f"🔧 #{job.id} {cut} without an answer: I found nothing I could use."
    if cut:
        return f"🔧 #{job.id} {cut}: here is what I have …\n\n{result.reply}"
    if result.gave_up:
        return f"🔧 #{job.id}: I could not finish the task. {result.reply}"
    return f"🔧 #{job.id}: {result.reply}"
