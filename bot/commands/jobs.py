"""`/jobs`: the chat's work that outlives a turn, and `/jobs cancel <id>`.

`/jobs` lists this chat's jobs with their state and age: in a group the sender's own
(admins: everyone's), in a private chat the person's own. `/jobs cancel <id>` cancels a
job that has not ended: its requester's, or any for an admin. The rules of running them
are core/jobs/runner.py's; this module only reads the command and words the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from core.admins import Admins
from core.clock import WallClock, utc_now
from core.messages import ChatType, InboundMessage, Reply
from memory.jobs.store import JobStore
from memory.jobs.types import Job

_ID = re.compile(r"^#?(\d{1,18})$")
USAGE = "Usage: /jobs — this chat's jobs; /jobs cancel <id> — cancel one (12 or #12)"
SHOWN = 15


def age(since: datetime, now: datetime) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def job_line(job: Job, now: datetime) -> str:
    """`#12 draw — running (attempt 1/3), 40s old, by Ann`."""
    state = job.state
    if state == "running":
        state = f"running (attempt {job.attempts}/{job.max_attempts})"
    return (
        f"#{job.id} {job.kind} — {state}, {age(job.created_at, now)} old, by {job.requester_name}"
    )


@dataclass(frozen=True)
class JobsCommand:
    """`/jobs` for bot/commands/table.py: (message, args) -> Reply."""

    jobs: JobStore
    admins: Admins
    clock: WallClock = utc_now

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        sub = args[0].casefold() if args else "list"
        if sub in ("list", "ls"):
            return Reply(await self._list(message))
        if sub in ("cancel", "stop", "rm"):
            return Reply(await self._cancel(message, args[1:]))
        return Reply(USAGE)

    async def _list(self, message: InboundMessage) -> str:
        everyone = self.admins.here(message) and message.chat_type is ChatType.GROUP
        mine = None if everyone else message.sender_id
        found = await self.jobs.listing(
            message.platform, message.chat_id, requester_id=mine, limit=SHOWN
        )
        if not found:
            return "No jobs here." if everyone else "You have no jobs here."
        now = self.clock()
        return "\n".join(job_line(job, now) for job in found)

    async def _cancel(self, message: InboundMessage, args: list[str]) -> str:
        found = _ID.match(args[0]) if args else None
        if found is None:
            return USAGE
        job = await self.jobs.get(int(found.group(1)))
        if job is None or job.chat_key != message.chat_key:
            return f"There is no job #{found.group(1)} in this chat."
        if job.requester_id != message.sender_id and not self.admins.here(message):
            return f"Job #{job.id} is {job.requester_name}'s: only they or an admin can cancel it."
        if not await self.jobs.cancel(job, message.sender_name, self.clock()):
            return f"Job #{job.id} has already ended ({job.state})."
        return f"Cancelled job #{job.id} ({job.kind})."
