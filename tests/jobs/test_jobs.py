"""The durable job runner (core/jobs/runner.py) over the real job store, on SQLite and
PostgreSQL: one claim per job across runners, checkpoints that survive a dead runner,
retries, a one-line failure, cancellation, and each outcome sent once."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from core.clock import utc_now
from core.jobs.asking import refused_line
from core.jobs.runner import JobContext, JobOutcome, JobRunner
from core.messages import DeliveryError, OutboundMessage, Sent
from memory.jobs.types import Job, JobDraft, JobRefused
from memory.turns.store import SqlStorage
from tests.fakes.manual_clock import ManualWallClock

LEASE_S = 0.3


class Chat:
    """Where outcomes go: records every send; can refuse the first ones."""

    def __init__(self, refuse: int = 0) -> None:
        self.sent: list[OutboundMessage] = []
        self._refuse = refuse

    async def send(self, message: OutboundMessage) -> Sent:
        if self._refuse:
            self._refuse -= 1
            raise DeliveryError("the platform is down")
        self.sent.append(message)
        return Sent()


def draft(kind: str = "count", **args: Any) -> JobDraft:
    return JobDraft(
        kind=kind,
        platform="telegram",
        chat_id="-100",
        chat_type="group",
        requester_id="7",
        requester_name="Ann",
        args=args,
        origin_message_id="55",
    )


def runner(storage: SqlStorage, chat: Chat, worker: str, **handlers: Any) -> JobRunner:
    return JobRunner(storage.jobs, handlers, chat.send, worker=worker, lease_s=LEASE_S)


async def counted(job: Job, ctx: JobContext) -> JobOutcome:
    """Counts to args['to'], one checkpoint a step, resuming where a dead runner stopped."""
    step = int(ctx.progress.get("step", 0))
    while step < job.args["to"]:
        step += 1
        await ctx.checkpoint(step=step)
    return JobOutcome(f"counted to {step}, resumed at {job.progress.get('step', 0)}")


async def until(check: Any, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


async def test_a_job_runs_once_and_its_outcome_is_sent_once_as_a_reply(
    storage: SqlStorage,
) -> None:
    chat = Chat()
    job = await storage.jobs.add(draft(to=3))
    one = runner(storage, chat, "a", count=counted)
    assert await one.tick() == 1
    await one.idle()
    assert await one.tick() == 0
    [sent] = chat.sent
    assert sent.text == "counted to 3, resumed at 0" and sent.reply_to_message_id == "55"
    done = await storage.jobs.get(job.id)
    assert done is not None and done.state == "done" and done.delivered_at is not None


async def test_two_runners_claim_a_job_once(storage: SqlStorage) -> None:
    calls: list[int] = []

    async def slow(job: Job, ctx: JobContext) -> JobOutcome:
        calls.append(job.id)
        await asyncio.sleep(0.2)
        return JobOutcome("done")

    chat = Chat()
    await storage.jobs.add(draft("slow"))
    runners = [runner(storage, chat, name, slow=slow) for name in ("a", "b", "c")]
    started = await asyncio.gather(*(r.tick() for r in runners))
    assert sum(started) == 1
    for r in runners:
        await r.idle()
    assert len(calls) == 1 and [m.text for m in chat.sent] == ["done"]


async def test_a_dead_runners_job_resumes_from_its_checkpoint(storage: SqlStorage) -> None:
    """A process claimed the job, got to step 2 and died (its lease was never renewed)."""
    clock = ManualWallClock(utc_now())
    job = await storage.jobs.add(draft(to=5))
    dead = await storage.jobs.claim("dead", clock(), 60, ["count"])
    assert dead is not None and dead.id == job.id
    assert await storage.jobs.checkpoint(dead, "dead", {"step": 2})
    chat = Chat()
    alive = JobRunner(storage.jobs, {"count": counted}, chat.send, worker="alive", clock=clock)
    clock.advance(seconds=59)
    assert await alive.tick() == 0  # the dead process's lease still holds
    clock.advance(seconds=2)
    assert await alive.tick() == 1
    await alive.idle()
    assert [m.text for m in chat.sent] == ["counted to 5, resumed at 2"]
    assert not await storage.jobs.checkpoint(dead, "dead", {"step": 9})  # not its own now


async def test_a_failing_job_is_retried_then_told_in_one_line(storage: SqlStorage) -> None:
    attempts: list[int] = []

    async def broken(job: Job, ctx: JobContext) -> JobOutcome:
        attempts.append(job.attempts)
        raise RuntimeError("the provider said no")

    chat = Chat()
    await storage.jobs.add(draft("broken"))
    one = runner(storage, chat, "a", broken=broken)
    for _ in range(5):
        await one.tick()
        await one.idle()
    assert attempts == [1, 2, 3]
    [told] = chat.sent
    assert told.text.startswith("Sorry, job #") and "the provider said no" in told.text


async def test_a_job_interrupted_on_every_attempt_is_given_up(storage: SqlStorage) -> None:
    job = await storage.jobs.add(draft(to=1))
    for _ in range(job.max_attempts):
        claimed = await storage.jobs.claim("dying", utc_now(), 0.01, ["count"])
        assert claimed is not None
        await asyncio.sleep(0.02)
    chat = Chat()
    one = runner(storage, chat, "a", count=counted)
    await one.tick()
    await one.tick()
    [told] = chat.sent
    assert "interrupted 3 times" in told.text
    failed = await storage.jobs.get(job.id)
    assert failed is not None and failed.state == "failed"


async def test_a_cancelled_job_stops_and_sends_nothing(storage: SqlStorage) -> None:
    started = asyncio.Event()

    async def forever(job: Job, ctx: JobContext) -> JobOutcome:
        started.set()
        await asyncio.sleep(60)
        return JobOutcome("never")

    chat = Chat()
    job = await storage.jobs.add(draft("forever"))
    one = runner(storage, chat, "a", forever=forever)
    await one.tick()
    await started.wait()
    assert await storage.jobs.cancel(job, "Ann", utc_now())
    await asyncio.wait_for(one.idle(), 5)  # the next renewal finds it gone and stops it
    assert chat.sent == []
    cancelled = await storage.jobs.get(job.id)
    assert cancelled is not None and cancelled.state == "cancelled"


async def test_an_outcome_the_platform_refused_is_sent_on_a_later_pass(
    storage: SqlStorage,
) -> None:
    chat = Chat(refuse=1)
    await storage.jobs.add(draft(to=1))
    one = runner(storage, chat, "a", count=counted)
    await one.tick()
    await one.idle()
    assert chat.sent == []
    await one.tick()
    await one.tick()
    assert [m.text for m in chat.sent] == ["counted to 1, resumed at 0"]


async def test_a_runner_stopping_lets_its_jobs_go_at_no_cost(storage: SqlStorage) -> None:
    started = asyncio.Event()

    async def waits(job: Job, ctx: JobContext) -> JobOutcome:
        started.set()
        await asyncio.sleep(60)
        return JobOutcome("never")

    job = await storage.jobs.add(draft("waits"))
    stop = asyncio.Event()
    one = runner(storage, Chat(), "a", waits=waits)
    loop = asyncio.create_task(one.run(stop))
    await started.wait()
    stop.set()
    await asyncio.wait_for(loop, 5)
    again = await storage.jobs.get(job.id)
    assert again is not None and (again.state, again.attempts) == ("queued", 0)


async def test_pending_jobs_per_person_are_bounded(storage: SqlStorage) -> None:
    for _ in range(2):
        await storage.jobs.add(draft(to=1), max_pending_per_user=2)
    with pytest.raises(JobRefused) as refused:
        await storage.jobs.add(draft(to=1), max_pending_per_user=2)
    assert (refused.value.pending, refused.value.limit) == (2, 2)
    line = refused_line(refused.value)  # the words are the core's, built from those facts
    assert "2 jobs waiting or running ([jobs] max_per_user)" in line
    listed = await storage.jobs.listing("telegram", "-100", requester_id="7")
    assert len(listed) == 2 and all(j.state == "queued" for j in listed)
    assert utc_now() - listed[0].created_at < timedelta(minutes=5)


async def test_a_runner_whose_own_lease_lapsed_in_a_stall_does_not_run_the_job_twice(
    storage: SqlStorage,
) -> None:
    """A stall longer than the lease (a busy database, a starved loop) lets this runner's
    own job look abandoned: its next pass must not claim it and start a second handler
    (two handlers, and the first one's answer sent twice)."""
    release = asyncio.Event()
    runs: list[int] = []

    async def waits(job: Job, ctx: JobContext) -> JobOutcome:
        runs.append(job.attempts)
        await release.wait()
        return JobOutcome("finished")

    chat = Chat()
    job = await storage.jobs.add(draft("waits"))
    one = runner(storage, chat, "a", waits=waits)
    assert await one.tick() == 1
    await until(lambda: _true(bool(runs)))
    lapsed = utc_now() - timedelta(seconds=30)
    assert await storage.jobs.renew(job, "a", lapsed, 0)  # its lease ran out in a stall
    assert await one.tick() == 0  # ...but it is still running here
    release.set()
    await one.idle()
    await one.tick()
    assert runs == [1] and [m.text for m in chat.sent] == ["finished"]


async def _true(value: bool) -> bool:
    return value


class SlowReads:
    """The job store, with `undelivered` rows held back after they are read until `gate`
    opens: the read that races a job's own delivery."""

    def __init__(self, storage: SqlStorage) -> None:
        self._jobs = storage.jobs
        self.gate = asyncio.Event()
        self.read = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jobs, name)

    async def undelivered(self, limit: int = 20) -> list[Job]:
        rows = await self._jobs.undelivered(limit)
        if rows:
            self.read.set()
            await self.gate.wait()
        return rows


async def test_an_outcome_its_own_run_sent_during_the_stored_pass_read_is_not_sent_again(
    storage: SqlStorage,
) -> None:
    """A pass reads the stored, unsent outcomes while a job's own run is sending its
    outcome; the run marks it sent and ends before the rows arrive: the pass must not send
    it a second time (seen in bench/jobs_kill_bench.py)."""
    queue = SlowReads(storage)
    sending, go = asyncio.Event(), asyncio.Event()
    sent: list[str] = []

    async def send(message: OutboundMessage) -> Sent:
        sending.set()
        await go.wait()
        sent.append(message.text)
        return Sent()

    async def quick(job: Job, ctx: JobContext) -> JobOutcome:
        return JobOutcome("the answer")

    await storage.jobs.add(draft("quick"))
    one = JobRunner(queue, {"quick": quick}, send, worker="a", lease_s=LEASE_S)  # type: ignore[arg-type]
    assert await one.tick() == 1
    await sending.wait()  # finished and stored; its run is sending it
    second = asyncio.create_task(one.tick())
    await queue.read.wait()  # the pass has read it as stored and unsent
    go.set()
    await one.idle()  # sent and marked by its own run, which has ended
    queue.gate.set()
    await second
    assert sent == ["the answer"]


async def test_two_replicas_send_a_stored_outcome_once(storage: SqlStorage) -> None:
    """An outcome stored by a process that died before sending it is sent by one replica,
    not by every replica whose pass finds it; and not by another while its own runner is
    still sending it."""
    chat = Chat()
    dead = await storage.jobs.add(draft())
    claimed = await storage.jobs.claim("dead", utc_now(), LEASE_S, ("count",))
    assert claimed is not None and claimed.id == dead.id
    assert await storage.jobs.finish(claimed, "dead", "done", "from the dead one")
    a, b = runner(storage, chat, "a"), runner(storage, chat, "b")
    await asyncio.gather(a.tick(), b.tick())  # each runner passes one at a time
    assert [m.text for m in chat.sent] == ["from the dead one"]

    sending, go = asyncio.Event(), asyncio.Event()

    async def slow(message: OutboundMessage) -> Sent:
        sending.set()
        await go.wait()
        return await chat.send(message)

    async def quick(job: Job, ctx: JobContext) -> JobOutcome:
        return JobOutcome("the live one's")

    await storage.jobs.add(draft("quick"))
    live = JobRunner(storage.jobs, {"quick": quick}, slow, worker="live", lease_s=30)
    assert await live.tick() == 1
    await sending.wait()  # stored; its own runner is sending it
    await runner(storage, chat, "other").tick()
    go.set()
    await live.idle()
    assert [m.text for m in chat.sent] == ["from the dead one", "the live one's"]


async def test_a_claim_held_by_a_worker_known_dead_is_taken_at_once_not_after_its_lease(
    storage: SqlStorage,
) -> None:
    """The lease (60 s) is only the fallback: a runner told which workers are alive takes
    a dead one's running job, its spent job and its undelivered outcome on the next pass."""
    now = utc_now()
    job = await storage.jobs.add(draft(to=2))
    assert await storage.jobs.claim("dead", now, 60, ["count"]) is not None
    alive = frozenset({"b", "other"})
    assert await storage.jobs.claim("b", now, 60, ["count"]) is None  # lease only: not yet
    assert await storage.jobs.claim("b", now, 60, ["count"], live=frozenset({"dead"})) is None
    taken = await storage.jobs.claim("b", now, 60, ["count"], live=alive)
    assert taken is not None and taken.id == job.id and taken.attempts == 2

    async def everyone_but_dead() -> frozenset[str] | None:
        return alive

    chat = Chat()
    dying = await storage.jobs.add(draft(to=1))
    assert await storage.jobs.claim("dead", now, 60, ["count"]) is not None
    assert await storage.jobs.finish(dying, "dead", "done", "kept outcome", hold_s=60)
    other = JobRunner(
        storage.jobs,
        {"count": counted},
        chat.send,
        worker="other",
        lease_s=60,
        liveness=everyone_but_dead,
    )
    await other.tick()
    await other.idle()
    assert "kept outcome" in [m.text for m in chat.sent]  # sent now, not after the hold


async def test_live_replicas_on_postgresql_name_this_daemon(storage: SqlStorage) -> None:
    if storage.database.dialect != "postgresql":
        pytest.skip("replicas are seen through pg_stat_activity on PostgreSQL only")
    from memory.db.capacity import live_replicas

    assert storage.database.replica is None or storage.database.replica in await live_replicas(
        storage.database
    )
