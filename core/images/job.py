"""The draw job: ask the provider once, keep the picture, hand it to the runner.

Why the picture is stored before it is sent: the provider is paid when it answers. A
process killed after that moment must not pay again on the next attempt, so the picture
goes into the job's checkpoint (`image_b64`) first; a later attempt that finds it there
skips the provider. (Killed while the provider is still drawing, the call is repeated:
nothing was received, so nothing can be kept.) The outcome is the picture with its prompt
as the caption; a refusal or a timeout is the one line the chat is told.
"""

from __future__ import annotations

import base64
import logging
from typing import Protocol

from core.images.artist import Drawn, DrawRefused
from core.jobs.runner import IMAGE_KEY, JobContext, JobHandler, JobOutcome, stored_image
from core.usage.meter import UsageSubject
from memory.jobs.types import Job

log = logging.getLogger(__name__)

CAPTION_CHARS = 1000  # Telegram takes 1024 characters of caption


class Draws(Protocol):
    async def draw(self, prompt: str) -> Drawn: ...


class ImageMeter(Protocol):
    """Where a drawn picture is counted (core.usage.meter.UsageRecorder.record_image)."""

    async def record_image(
        self, who: UsageSubject, model: str, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None: ...


def caption_of(prompt: str) -> str:
    text = " ".join(prompt.split())
    return text if len(text) <= CAPTION_CHARS else text[: CAPTION_CHARS - 1] + "…"


def draw_handler(artist: Draws, meter: ImageMeter | None = None) -> JobHandler:
    """The runner's handler for jobs of kind "draw" (args: {"prompt": ...})."""

    async def draw(job: Job, context: JobContext) -> JobOutcome:
        prompt = str(job.args.get("prompt") or "")
        image = stored_image(context.progress)
        if image is not None:
            log.info(
                "jobs: #%d's picture was kept from an earlier attempt; not drawn again", job.id
            )
        else:
            try:
                drawn = await artist.draw(prompt)
            except DrawRefused as exc:
                return JobOutcome(f"🎨 #{job.id}: {exc}", state="failed")
            if meter is not None:  # paid now, whatever happens next
                who = UsageSubject(job.platform, job.chat_id, job.requester_id)
                await meter.record_image(
                    who, drawn.model, drawn.prompt_tokens, drawn.completion_tokens
                )
            image = drawn.image
            await context.checkpoint(**{IMAGE_KEY: base64.b64encode(image).decode("ascii")})
        return JobOutcome(caption_of(prompt), image=image, result={"bytes": len(image)})

    return draw
