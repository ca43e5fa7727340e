"""Who asks for a job from inside a turn: the tool context's sender, chat and message.

Why one function: the draw tool and the spawn tool both hand a job to the runner on
behalf of the turn's sender, and both must name the same chat, thread and asking
message (never one taken from the model's marker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from core.admins import Admins, Someone
from core.messages import InboundMessage
from core.tools.mcp.config import Allow
from core.tools.mcp.permission import Sender, allows
from core.tools.registry import Observation, ToolContext
from memory.jobs.types import JobAsker, JobRefused

if TYPE_CHECKING:  # the store itself is the seam's type; core never loads it at run time
    from memory.jobs.store import JobStore

Asker = TypeVar("Asker", bound=JobAsker)


def asker_in(kind: type[Asker], ctx: ToolContext, **what: Any) -> Asker:
    """A `kind` asked by this turn's sender in this turn's chat, with `what` it asks for."""
    inbound = ctx.extra.get("inbound")
    message = inbound if isinstance(inbound, InboundMessage) else None
    return kind(
        platform=ctx.platform,
        chat_id=ctx.chat_id,
        chat_type=str(message.chat_type) if message is not None else "private",
        user_id=ctx.user_id,
        name=ctx.display_name,
        thread_id=message.thread_id if message is not None else None,
        # a scheduled turn's id is ours, not the platform's: its answer quotes nothing
        message_id=message.message_id if message and not message.scheduled else None,
        **what,
    )


def refused_line(refused: JobRefused) -> str:
    """Why a person's job was not taken, in words for them (no final stop)."""
    return (
        f"you already have {refused.limit} jobs waiting or running "
        "([jobs] max_per_user); wait for one to finish"
    )


@dataclass(frozen=True)
class Asked:
    """A desk's answer to an asker: the line for the chat, and the job when one was made."""

    line: str
    job_id: int | None = None


def asked_observation(asked: Asked, doing: str) -> Observation:
    """What the model is told after asking for a job: say the desk's line now, and that
    the job's result (`doing`) reaches the chat by itself; or why nothing was started."""
    if asked.job_id is None:
        return Observation(f"{asked.line} Tell the user so in one line.", ok=False)
    return Observation(
        f"Job #{asked.job_id} {doing}; it will be sent to this chat by itself. "
        f"Say now, in one short line: {asked.line}"
    )


@dataclass(frozen=True)
class AskRules:
    """Who may ask for a kind of job (its `allow` rule, the MCP tools' shape, with the
    admin decision) and how many of one person's jobs may wait (`[jobs] max_per_user`;
    0: no cap)."""

    allow: Allow
    admins: Admins
    max_pending_per_user: int = 0

    def allows(self, who: Someone) -> bool:
        """The rule for this person in their chat, checked when offered and when run."""
        return allows(self.allow, Sender(who.sender_key, self.admins.here(who)))


class JobDesk:
    """Where one kind of job is asked for: its store and who may ask (its rules)."""

    def __init__(self, jobs: JobStore, rules: AskRules) -> None:
        self._jobs = jobs
        self._rules = rules

    def may_ask(self, who: Someone) -> bool:
        """This desk's allow rule for this person in their chat."""
        return self._rules.allows(who)

    async def _store(
        self, asker: JobAsker, kind: str, args: dict[str, Any], line: Callable[[int], str], no: str
    ) -> Asked:
        """The job stored (its `line` for the chat), or `no: why` when the store refuses."""
        draft = asker.draft(kind, args)
        try:
            job = await self._jobs.add(draft, max_pending_per_user=self._rules.max_pending_per_user)
        except JobRefused as exc:
            return Asked(f"{no}: {refused_line(exc)}.")
        return Asked(line(job.id), job.id)
