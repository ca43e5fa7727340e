"""Who may ask for a picture, how many a day, and the job that draws it.

Why one desk for `/draw` and the model's `draw` tool: both must meet the same rules (the
`[images] allow` rule, the daily limits per person and per chat, `[jobs] max_per_user`)
and answer the same way ("🎨 drawing… (#id)" at once, the picture later), so the rules
live here once. The daily count is of today's draw jobs that did not fail or get
cancelled, so requests still waiting count too (two at once cannot share the last place).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import UTC
from typing import TYPE_CHECKING

from core.clock import WallClock, utc_now
from core.tools.mcp.config import Allow
from core.tools.mcp.permission import Sender, allows
from memory.job_types import JobAsker, JobRefused

if TYPE_CHECKING:  # the store itself is the seam's type; core never loads it at run time
    from memory.jobs import JobStore as DrawJobs

KIND = "draw"
MAX_PROMPT_CHARS = 1000


@dataclass(frozen=True)
class DrawRules:
    allow: Allow
    admins: frozenset[str]
    max_per_user_per_day: int = 0  # 0: no limit
    max_per_chat_per_day: int = 0
    max_pending_per_user: int = 0  # [jobs] max_per_user


@dataclass(frozen=True)
class DrawRequest(JobAsker):
    """A picture asked for: by whom, where its answer goes (JobAsker), what to draw."""

    _: KW_ONLY
    prompt: str


@dataclass(frozen=True)
class Asked:
    """The desk's answer: the line for the chat, and the job when one was made."""

    line: str
    job_id: int | None = None


def drawing_line(job_id: int) -> str:
    return f"🎨 drawing… (#{job_id})"


class DrawDesk:
    def __init__(self, jobs: DrawJobs, rules: DrawRules, clock: WallClock = utc_now) -> None:
        self._jobs = jobs
        self._rules = rules
        self._clock = clock

    def may_draw(self, sender_key: str) -> bool:
        """The `[images] allow` rule for this person ("platform:id")."""
        sender = Sender(sender_key, sender_key in self._rules.admins)
        return allows(self._rules.allow, sender)

    async def ask(self, request: DrawRequest) -> Asked:
        """Store a draw job, or say in one line why not (nothing is stored then)."""
        prompt = " ".join(request.prompt.split())[:MAX_PROMPT_CHARS]
        if not prompt:
            return Asked("Say what to draw: /draw <what the picture shows>")
        if not self.may_draw(request.sender_key):
            return Asked("Drawing pictures is not available to you here ([images] allow).")
        over = await self._over_limit(request)
        if over is not None:
            return Asked(over)
        draft = request.draft(KIND, {"prompt": prompt})
        try:
            job = await self._jobs.add(draft, max_pending_per_user=self._rules.max_pending_per_user)
        except JobRefused as exc:
            return Asked(f"Not drawing: {exc}.")
        return Asked(drawing_line(job.id), job.id)

    async def _over_limit(self, request: DrawRequest) -> str | None:
        now = self._clock().astimezone(UTC)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        limits = (
            ("max_per_user_per_day", "you have", "one person", {"requester_id": request.user_id}),
            ("max_per_chat_per_day", "this chat has", "one chat", {"chat_id": request.chat_id}),
        )
        for key, who, whom, scope in limits:
            limit = getattr(self._rules, key)
            if not limit:
                continue
            had = await self._jobs.count_since(KIND, request.platform, midnight, **scope)
            if had >= limit:
                return (
                    f"Not drawing: {who} had {had} pictures today, the most {whom} may have "
                    f"([images] {key} = {limit}); the count starts again at 00:00 UTC."
                )
        return None
