"""Who may start a background task, and the job that does it.

Why a desk: the `spawn` tool must meet the same rules whoever writes the call (the
`[jobs] spawn_allow` rule, checked when the tool is offered and again here when it runs;
`[jobs] max_per_user` pending per person; one task per message, so a turn run again
after a crash does not start a second) and answer the same way ("🔧 working on it
(#id)" at once, the answer later), so the rules live here once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.tools.mcp.config import Allow
from core.tools.mcp.permission import Sender, allows
from memory.job_types import JobDraft, JobRefused

if TYPE_CHECKING:  # the store itself is the seam's type; core never loads it at run time
    from memory.jobs import JobStore as TaskJobs

KIND = "task"
MAX_TASK_CHARS = 2000


@dataclass(frozen=True)
class TaskRules:
    allow: Allow
    admins: frozenset[str]
    max_pending_per_user: int = 0  # [jobs] max_per_user; 0: no limit


@dataclass(frozen=True)
class TaskRequest:
    """A task asked for: by whom, where its answer goes, what to do."""

    platform: str
    chat_id: str
    chat_type: str  # "private" | "group"
    user_id: str
    name: str
    task: str
    thread_id: str | None = None
    origin_message_id: str | None = None

    @property
    def sender_key(self) -> str:
        return f"{self.platform}:{self.user_id}"


@dataclass(frozen=True)
class Spawned:
    """The desk's answer: the line for the chat, and the job when one was made."""

    line: str
    job_id: int | None = None


def working_line(job_id: int) -> str:
    return f"🔧 working on it (#{job_id})"


def anywhere(platform: str) -> bool:
    return True


class TaskDesk:
    """`reachable(platform)`: a message nobody waits for can reach that platform's chats
    (an HTTP chat without `[http] push_url` cannot: its task's answer would never arrive,
    so the model is told to do the task in the turn instead)."""

    def __init__(
        self, jobs: TaskJobs, rules: TaskRules, reachable: Callable[[str], bool] = anywhere
    ) -> None:
        self._jobs = jobs
        self._rules = rules
        self._reachable = reachable

    def may_spawn(self, sender_key: str) -> bool:
        """The `[jobs] spawn_allow` rule for this person ("platform:id")."""
        sender = Sender(sender_key, sender_key in self._rules.admins)
        return allows(self._rules.allow, sender)

    async def ask(self, request: TaskRequest) -> Spawned:
        """Store a task job, or say in one line why not (nothing is stored then)."""
        task = request.task.strip()[:MAX_TASK_CHARS]
        if not task:
            return Spawned("A background task needs a description of what to do.")
        if not self.may_spawn(request.sender_key):
            return Spawned("Background tasks are not available to you here ([jobs] spawn_allow).")
        if not self._reachable(request.platform):
            return Spawned(
                "Background tasks cannot answer in this chat later (it takes no messages "
                "nobody waits for): do the task now, in this turn, instead."
            )
        if request.origin_message_id:  # one task per message: a turn run again after a
            # crash (recovery) finds the task its first run started, not a second one
            known = await self._jobs.asked_by(
                KIND, request.platform, request.chat_id, request.origin_message_id
            )
            if known is not None:
                return Spawned(working_line(known.id), known.id)
        draft = JobDraft(
            KIND,
            request.platform,
            request.chat_id,
            request.chat_type,
            request.user_id,
            request.name,
            args={"task": task},
            thread_id=request.thread_id,
            origin_message_id=request.origin_message_id,
        )
        try:
            job = await self._jobs.add(draft, max_pending_per_user=self._rules.max_pending_per_user)
        except JobRefused as exc:
            return Spawned(f"Not started: {exc}.")
        return Spawned(working_line(job.id), job.id)
