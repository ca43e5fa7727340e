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
from core.jobs.asking import Asked, AskRules, JobDesk
from memory.jobs.types import JobAsker

if TYPE_CHECKING:  # the store itself is the seam's type; core never loads it at run time
    from memory.jobs.store import JobStore as DrawJobs

KIND = "draw"
MAX_PROMPT_CHARS = 1000


@dataclass(frozen=True)
class DrawRules(AskRules):
    """`[images] allow` and the admins, with the daily limits (0: no limit)."""

    max_per_user_per_day: int = 0
    max_per_chat_per_day: int = 0


@dataclass(frozen=True)
class DrawRequest(JobAsker):
    """A picture asked for: by whom, where its answer goes (JobAsker), what to draw."""

    _: KW_ONLY
    prompt: str


def drawing_line(job_id: int) -> str:
    return f"🎨 drawing… (#{job_id})"


class DrawDesk(JobDesk):
    def __init__(self, jobs: DrawJobs, rules: DrawRules, clock: WallClock = utc_now) -> None:
        super().__init__(jobs, rules)
        self._clock = clock

    may_draw = JobDesk.may_ask  # [images] allow

    async def ask(self, request: DrawRequest) -> Asked:
        """Store a draw job, or say in one line why not (nothing is stored then)."""
        prompt = " ".join(request.prompt.split())[:MAX_PROMPT_CHARS]
        if not prompt:
            return Asked("Say what to draw: /draw <what the picture shows>")
        if not self.may_draw(request):
            return Asked("Drawing pictures is not available to you here ([images] allow).")
        over = await self._over_limit(request)
        if over is not None:
            return Asked(over)
        return await self._store(request, KIND, {"prompt": prompt}, drawing_line, "Not drawing")

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
