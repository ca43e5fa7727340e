"""Who may start a background task, and the job that does it.

Why a desk: the `spawn` tool must meet the same rules whoever writes the call (the
`[jobs] spawn_allow` rule, checked when the tool is offered and again here when it runs;
`[jobs] max_per_user` pending per person; one task per message, so a turn run again
after a crash does not start a second) and answer the same way ("🔧 working on it
(#id)" at once, the answer later), so the rules live here once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

from core.jobs.asking import Asked, AskRules, JobDesk
from memory.jobs.types import JobAsker

if TYPE_CHECKING:  # the store itself is the seam's type; core never loads it at run time
    from memory.jobs.store import JobStore as TaskJobs

KIND = "task"
MAX_TASK_CHARS = 2000


TaskRules = AskRules  # [jobs] spawn_allow, the admins, [jobs] max_per_user


@dataclass(frozen=True)
class TaskRequest(JobAsker):
    """A task asked for: by whom, where its answer goes (JobAsker), what to do."""

    _: KW_ONLY
    task: str


Spawned = Asked  # the desk's answer: the line for the chat, and the job when one was made


def working_line(job_id: int) -> str:
    return f"🔧 working on it (#{job_id})"


def anywhere(platform: str) -> bool:
    return True


class TaskDesk(JobDesk):
    """`reachable(platform)`: a message nobody waits for can reach that platform's chats
    (an HTTP chat without `[http] push_url` cannot: its task's answer would never arrive,
    so the model is told to do the task in the turn instead)."""

    def __init__(
        self, jobs: TaskJobs, rules: TaskRules, reachable: Callable[[str], bool] = anywhere
    ) -> None:
        super().__init__(jobs, rules)
        self._reachable = reachable

    may_spawn = JobDesk.may_ask  # [jobs] spawn_allow

    async def ask(self, request: TaskRequest) -> Spawned:
        """Store a task job, or say in one line why not (nothing is stored then)."""
        task = request.task.strip()[:MAX_TASK_CHARS]
        if not task:
            return Spawned("A background task needs a description of what to do.")
        if not self.may_spawn(request):
            return Spawned("Background tasks are not available to you here ([jobs] spawn_allow).")
        if not self._reachable(request.platform):
            return Spawned(
                "Background tasks cannot answer in this chat later (it takes no messages "
                "nobody waits for): do the task now, in this turn, instead."
            )
        if request.message_id:  # one task per message: a turn run again after a
            # crash (recovery) finds the task its first run started, not a second one
            known = await self._jobs.asked_by(
                KIND, request.platform, request.chat_id, request.message_id
            )
            if known is not None:
                return Spawned(working_line(known.id), known.id)
        return await self._store(request, KIND, {"task": task}, working_line, "Not started")
