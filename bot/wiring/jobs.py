"""The job runner's wiring: one runner per process, its kinds registered by the features
that need one (pictures, background tasks, documents being indexed).

The runner's worker name, its limits and which kinds it runs are decided here.
"""

from __future__ import annotations

import os
import socket
import uuid

from bot.config import Settings
from core.clock import WallClock
from core.jobs.runner import JobRunner, Liveness
from core.turn.delivery import Outbox
from memory.db.capacity import live_replicas
from memory.turns.store import SqlStorage


def worker_name(storage: SqlStorage) -> str:
    """This process among the replicas: its PostgreSQL replica id, else host, pid and a
    start mark (a restarted container's daemon may get the same pid again)."""
    replica = storage.database.replica
    return replica or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"[-64:]


def liveness_of(storage: SqlStorage, worker: str) -> Liveness:
    """Who is alive: on PostgreSQL the replicas with a session now; on SQLite only this
    process runs, so every claim but its own is a dead process's."""
    database = storage.database
    if database.dialect == "sqlite" or database.replica is None:
        alone = frozenset({worker})

        async def only_this_process() -> frozenset[str] | None:
            return alone

        return only_this_process

    async def replicas_with_a_session() -> frozenset[str] | None:
        return await live_replicas(database)

    return replicas_with_a_session


def build_job_runner(
    settings: Settings, storage: SqlStorage, outbox: Outbox, clock: WallClock
) -> JobRunner:
    """The runner, with no kinds yet: each feature registers its own (`register`)."""
    config = settings.jobs
    worker = worker_name(storage)
    return JobRunner(
        storage.jobs,
        {},
        outbox.send_proactive,  # the one door out
        worker=worker,
        max_running=config.max_running,
        lease_s=config.lease_s,
        clock=clock,
        liveness=liveness_of(storage, worker),
    )
