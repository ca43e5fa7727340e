"""One paced send queue per QQ account, so bursts from many chats never trip risk control.

Why: QQ watches how fast an account sends. NapCat and go-cqhttp send whatever they are
given at once, and a burst (a long answer in pieces, several chats answered together)
gets an account's group sending switched off for a day. So every send of one account
goes through one FIFO queue whose sends start at least `interval_s` apart; different
accounts do not wait for each other.

A send waiting in the queue belongs to its caller: it gets the send's result or its
exception (and a caller that gives up takes its send out of the line). A send starts
when its turn comes and is not waited for before the next one's turn is timed, so one
slow send never holds the others up longer than the interval. Time comes from an
injected `Clock`, so tests move it by hand and never sleep.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from channels.onebot.actions import OneBotError
from core.clock import Clock, SystemClock

log = logging.getLogger(__name__)

T = TypeVar("T")


class SendQueueClosed(OneBotError):
    """The channel is stopping: a send still waiting in the queue was not made."""


@dataclass
class _Job:
    run: Callable[[], Awaitable[Any]]
    done: asyncio.Future[Any]


class AccountQueue:
    """The sends of one account, started in order, at least `interval_s` apart."""

    def __init__(self, account: str, interval_s: float, clock: Clock) -> None:
        self.account = account
        self._interval_s = interval_s
        self._clock = clock
        self._jobs: asyncio.Queue[_Job] = asyncio.Queue()
        self._last_start: float | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closed = False
        self._worker = asyncio.create_task(self._work(), name=f"onebot-send-{account}")

    @property
    def waiting(self) -> int:
        """Sends in line that have not started yet."""
        return self._jobs.qsize()

    async def submit(self, run: Callable[[], Awaitable[T]]) -> T:
        """Queue `run`, wait for its turn and its result; its exception is raised here."""
        if self._closed:
            raise SendQueueClosed("the QQ channel is stopping")
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._jobs.put_nowait(_Job(run, done))
        # A caller cancelled while waiting cancels `done`: the worker then skips the job.
        return cast(T, await done)

    async def _work(self) -> None:
        while True:
            job = await self._jobs.get()
            if job.done.done():
                continue  # its caller gave up while it waited
            try:
                await self._wait_turn()
            except asyncio.CancelledError:
                _settle(job, SendQueueClosed("the QQ channel stopped before the send"))
                raise
            if job.done.done():
                continue
            self._last_start = self._clock.monotonic()
            task = asyncio.create_task(self._run(job))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _wait_turn(self) -> None:
        if self._last_start is None:
            return
        wait = self._last_start + self._interval_s - self._clock.monotonic()
        if wait > 0:
            await self._clock.sleep(wait)

    @staticmethod
    async def _run(job: _Job) -> None:
        try:
            result = await job.run()
        except asyncio.CancelledError:
            _settle(job, SendQueueClosed("the QQ channel stopped during the send"))
            raise
        except Exception as exc:  # the caller gets it, whatever it is
            _settle(job, exc)
        else:
            if not job.done.done():
                job.done.set_result(result)

    async def close(self) -> None:
        """Stop: sends still in line fail with SendQueueClosed, sends under way are
        cancelled (the connection is closing anyway), and nothing is left running."""
        self._closed = True
        self._worker.cancel()
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(self._worker, *running, return_exceptions=True)
        dropped = 0
        while not self._jobs.empty():
            job = self._jobs.get_nowait()
            if not job.done.done():
                dropped += 1
            _settle(job, SendQueueClosed("the QQ channel stopped before the send"))
        if dropped:
            log.info("onebot[%s]: %d queued send(s) dropped at stop", self.account, dropped)


def _settle(job: _Job, exc: BaseException) -> None:
    if not job.done.done():
        job.done.set_exception(exc)


class SendPacer:
    """One AccountQueue per account (QQ number), made on the first send."""

    def __init__(self, interval_s: float, clock: Clock | None = None) -> None:
        self.interval_s = interval_s
        self.clock: Clock = clock or SystemClock()
        self._queues: dict[str, AccountQueue] = {}
        self._closed = False

    async def send(self, account: str, run: Callable[[], Awaitable[T]]) -> T:
        """Run `run` when it is `account`'s turn; its result or exception comes back."""
        if self._closed:
            raise SendQueueClosed("the QQ channel is stopping")
        queue = self._queues.get(account)
        if queue is None:
            queue = self._queues[account] = AccountQueue(account, self.interval_s, self.clock)
        return await queue.submit(run)

    def waiting(self, account: str) -> int:
        queue = self._queues.get(account)
        return queue.waiting if queue is not None else 0

    async def close(self) -> None:
        self._closed = True
        queues, self._queues = list(self._queues.values()), {}
        for queue in queues:
            await queue.close()
