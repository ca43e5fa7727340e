"""The one durable job runner: claims jobs, runs their handlers, sends each outcome once.

Every long job must end exactly once in the chat that asked, across kill -9 and
replicas:

- a job is claimed by one process under a lease (memory/jobs/store.py) and the lease is renewed
  while its handler works; a handler whose lease is lost (cancelled, or taken over after a
  stall) is stopped; a claim held by a process known to be dead (`Liveness`) is taken at
  once, and the lease's end is the fallback where that cannot be known;
- a handler may store checkpoints (`JobContext.checkpoint`): a job claimed again after its
  process died resumes from there, up to `max_attempts`;
- a handler that raises is retried (its lease is let go) until its attempts are spent,
  then the chat is told in one line;
- the outcome is stored before it is sent (`finish`), sent through the one door
  (`Outbox.send_proactive`), then marked delivered; an outcome stored but not sent (the
  process died in between) is sent by the next pass of any runner.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from core.clock import WallClock, utc_now
from core.messages import DeliveryError, OutboundMessage, Sent, message_to
from memory.jobs.types import Job

if TYPE_CHECKING:  # the store itself is the seam's type; core never loads it at run time
    from memory.jobs.store import JobStore as JobQueue

log = logging.getLogger(__name__)

DEFAULT_LEASE_S = 60.0

# Which workers are alive now: None when that cannot be known (then only leases tell).
Liveness = Callable[[], Awaitable[frozenset[str] | None]]


async def unknown_liveness() -> frozenset[str] | None:
    return None


class JobLost(Exception):
    """The job is no longer this runner's (cancelled, or claimed by another after a stall)."""


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended: the text its chat is sent, and what to keep of it."""

    text: str
    state: Literal["done", "failed"] = "done"
    result: dict[str, Any] = field(default_factory=dict)
    cost_tokens: int = 0
    # A picture sent with `text` as its caption; kept in the stored result (IMAGE_KEY) so
    # an outcome stored but not yet sent goes out whole after a crash.
    image: bytes | None = None

    def stored_result(self) -> dict[str, Any]:
        if self.image is None:
            return self.result
        return {**self.result, IMAGE_KEY: base64.b64encode(self.image).decode("ascii")}


IMAGE_KEY = "image_b64"
# The chat type of a job no chat asked for (a file in the knowledge folder, a console
# upload): its outcome is stored and logged, never sent (there is nobody to send it to).
NO_CHAT = "none"


def stored_image(result: dict[str, Any]) -> bytes | None:
    """The picture an outcome carries, from its stored result (None: a text outcome)."""
    encoded = result.get(IMAGE_KEY)
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        log.warning("jobs: a stored picture is not base64; sending the text alone")
        return None


class JobContext:
    """What a handler is handed besides its job: where it got to, and how to say so."""

    def __init__(self, queue: JobQueue, job: Job, worker: str) -> None:
        self.job = job
        self.progress: dict[str, Any] = dict(job.progress)
        self._queue = queue
        self._worker = worker

    async def checkpoint(self, **progress: Any) -> None:
        """Store how far the job got; a later attempt starts with it in `progress`.
        Raises JobLost when the job is no longer this runner's."""
        self.progress.update(progress)
        if not await self._queue.checkpoint(self.job, self._worker, self.progress):
            raise JobLost(f"job #{self.job.id} is no longer ours")


JobHandler = Callable[[Job, JobContext], Coroutine[Any, Any, JobOutcome]]
Send = Callable[[OutboundMessage], Awaitable[Sent]]


def outcome_message(job: Job, text: str, image: bytes | None = None) -> OutboundMessage:
    """A job's outcome in its chat, as a reply to the message that asked (it comes late,
    after other messages, in a DM too); where that message is gone it goes plainly."""
    group = job.chat_type == "group"
    return message_to(
        job,
        text,
        quoting=job.origin_message_id,
        image=image,
        mention_user_id=job.requester_id if group and not job.origin_message_id else None,
        occurrence_id=f"job:{job.id}",  # the same on a resend after a crash
    )


class JobRunner:
    """`run(stop)` is the background loop; `tick()` one pass (tests call it directly)."""

    def __init__(
        self,
        queue: JobQueue,
        handlers: Mapping[str, JobHandler],
        send: Send,
        *,
        worker: str,
        max_running: int = 2,
        lease_s: float = DEFAULT_LEASE_S,
        interval_s: float = 1.0,
        clock: WallClock = utc_now,
        liveness: Liveness = unknown_liveness,
    ) -> None:
        self._queue = queue
        self._handlers = dict(handlers)
        self._send = send
        self._worker = worker
        self._max_running = max(1, max_running)
        self._lease_s = lease_s
        self._interval_s = interval_s
        self._clock = clock
        self._liveness = liveness
        self._running: dict[int, asyncio.Task[None]] = {}

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self._handlers)

    def register(self, kind: str, handler: JobHandler) -> None:
        """Run jobs of `kind` with `handler` (features register theirs at start)."""
        if kind in self._handlers:
            raise ValueError(f"job kind {kind!r} is registered twice")
        self._handlers[kind] = handler

    async def tick(self) -> int:
        """Send stored outcomes, close jobs whose attempts are spent, start what fits.
        Returns how many jobs were started."""
        live = await self._liveness()
        await self._deliver_stored(live)
        await self._close_spent(live)
        started = 0
        while self._handlers and len(self._running) < self._max_running:
            job = await self._queue.claim(
                self._worker,
                self._clock(),
                self._lease_s,
                tuple(self._handlers),
                skip=tuple(self._running),  # never a second handler for one job
                live=live,
            )
            if job is None:
                break
            task = asyncio.create_task(self._run(job), name=f"job {job.id} ({job.kind})")
            self._running[job.id] = task
            task.add_done_callback(partial(self._ended, job.id))
            started += 1
        return started

    def _ended(self, job_id: int, _task: asyncio.Task[None]) -> None:
        self._running.pop(job_id, None)

    async def idle(self) -> None:
        """Wait for the jobs running now (tests)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def run(self, stop: asyncio.Event) -> None:
        """Pass every `interval_s` until `stop`; then stop the running jobs (they are
        claimed again, from their checkpoints, after their lease)."""
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("jobs: a pass failed; trying again")
            try:
                await asyncio.wait_for(stop.wait(), self._interval_s)
            except TimeoutError:
                pass
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def _run(self, job: Job) -> None:
        handler = self._handlers[job.kind]
        context = JobContext(self._queue, job, self._worker)
        work = asyncio.create_task(handler(job, context))
        keeper = asyncio.create_task(self._keep_lease(job, work))
        try:
            outcome = await work
        except JobLost:
            log.info("jobs: #%d (%s) is no longer ours; stopped", job.id, job.kind)
            return
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # The runner is stopping: let the job go now, at no cost to its attempts.
                await asyncio.shield(self._queue.release(job, self._worker, refund=True))
                raise
            log.info("jobs: #%d (%s) was cancelled or taken over; stopped", job.id, job.kind)
            return
        except Exception as exc:
            await self._failed(job, exc)
            return
        finally:
            keeper.cancel()
        if await self._queue.finish(
            job,
            self._worker,
            outcome.state,
            outcome.text,
            result=outcome.stored_result(),
            cost_tokens=outcome.cost_tokens,
            hold_s=self._lease_s,  # no other replica sends it while this one does
        ):
            await self._deliver(job, outcome.text, outcome.image, outcome.result)

    async def _keep_lease(self, job: Job, work: asyncio.Task[JobOutcome]) -> None:
        while not work.done():
            await asyncio.sleep(self._lease_s / 3)
            try:
                mine = await self._queue.renew(job, self._worker, self._clock(), self._lease_s)
            except Exception:  # the database busy or away: try again at the next third
                log.warning("jobs: #%d's lease not renewed this time", job.id, exc_info=True)
                continue
            if not mine:
                work.cancel()  # cancelled, or another runner took it over
                return

    async def _failed(self, job: Job, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"[:200]
        if job.attempts < job.max_attempts:
            log.warning(
                "jobs: #%d (%s) failed (%s); it will be tried again", job.id, job.kind, reason
            )
            await self._queue.release(job, self._worker)
            return
        log.error("jobs: #%d (%s) failed for good: %s", job.id, job.kind, reason)
        text = f"Sorry, job #{job.id} ({job.kind}) could not be finished: {exc}"[:300]
        if await self._queue.finish(job, self._worker, "failed", text, hold_s=self._lease_s):
            await self._deliver(job, text)

    async def _close_spent(self, live: frozenset[str] | None) -> None:
        now = self._clock()
        for job in await self._queue.spent(now, live=live):
            text = (
                f"Sorry, job #{job.id} ({job.kind}) could not be finished: it was "
                f"interrupted {job.attempts} times."
            )
            if await self._queue.give_up(job, now, text):
                log.error(
                    "jobs: #%d (%s) interrupted %d times; given up", job.id, job.kind, job.attempts
                )

    async def _deliver_stored(self, live: frozenset[str] | None) -> None:
        # A job running here when the read begins is its own run's to send: it may be
        # sent and marked, and gone from `_running`, by the time the (older) rows arrive.
        busy = set(self._running)
        for job in await self._queue.undelivered():
            if job.id in busy or job.id in self._running or job.outcome is None:
                continue
            now = self._clock()
            if not await self._queue.take_delivery(job, self._worker, now, self._lease_s, live):
                continue  # another replica is sending it
            await self._deliver(job, job.outcome, stored_image(job.result), job.result)

    async def _deliver(
        self,
        job: Job,
        text: str,
        image: bytes | None = None,
        result: dict[str, Any] | None = None,
    ) -> None:
        if job.chat_type == NO_CHAT:
            log.info("jobs: #%d (%s) ended: %s", job.id, job.kind, text)
            await self._queue.delivered(job, self._clock())
            return
        try:
            await self._send(outcome_message(job, text, image))
        except DeliveryError as exc:
            if not exc.permanent:
                log.warning("jobs: #%d's outcome not delivered yet (%s); trying again", job.id, exc)
                return
            # It can never reach that chat (e.g. an HTTP chat with no push target): stop
            # trying; `/jobs` still shows the job and its outcome.
            log.warning("jobs: #%d's outcome cannot be delivered (%s); given up", job.id, exc)
        # <- the one-write window: sent, not yet marked (memory/jobs/store.py)
        if image is None:
            await self._queue.delivered(job, self._clock())
            return
        # A picture is kept (result, checkpoint) only until it is sent: drop it now.
        kept = {key: value for key, value in (result or {}).items() if key != IMAGE_KEY}
        await self._queue.delivered(job, self._clock(), result=kept)
