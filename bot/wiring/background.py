"""Background tasks in the daemon: the desk and the `spawn` tool from `[jobs]`, and the
"task" job kind run by the turns' own tool loop (same registry, MCP servers, meter).

The limits a task runs under (`[jobs] spawn_allow`, `max_steps`, `max_tokens`,
`max_per_user`) are read from the settings here.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Settings
from core.admins import Admins
from core.background.agent import TaskLimits, TaskLoop, task_handler
from core.background.desk import KIND, TaskDesk, TaskRules
from core.background.tool import spawn_tool
from core.jobs.runner import JobRunner
from core.tools.registry import ToolRegistry
from core.turn.delivery import ChannelRoutes
from memory.jobs.store import JobStore
from memory.memories.types import MemoryStore


@dataclass(frozen=True)
class Tasks:
    """The built parts; `add_tool` offers spawn, `attach` registers the job kind."""

    desk: TaskDesk
    limits: TaskLimits

    def add_tool(self, registry: ToolRegistry) -> None:
        registry.register(spawn_tool(self.desk))

    def attach(self, runner: JobRunner, loop: TaskLoop, memory: MemoryStore) -> None:
        runner.register(KIND, task_handler(loop, memory, self.limits))


def build_tasks(settings: Settings, jobs: JobStore, routes: ChannelRoutes, admins: Admins) -> Tasks:
    """The parts; a task is refused in chats its answer could not reach later (a running
    channel that takes no proactive messages: HTTP without a push target)."""
    config = settings.jobs

    def reachable(platform: str) -> bool:
        return not routes.can_send(platform) or routes.takes_proactive(platform)

    rules = TaskRules(
        allow=config.spawn_allow,
        admins=admins,
        max_pending_per_user=config.max_per_user,
    )
    limits = TaskLimits(
        max_steps=config.max_steps, max_tokens=config.max_tokens, bot_name=settings.bot.name
    )
    return Tasks(TaskDesk(jobs, rules, reachable), limits)
