"""The job runner's wiring: one runner per process, its kinds registered by the features
that need one (pictures, background tasks, documents being indexed).

Why a module of its own: bot/wiring/app.py stays a table of parts; the runner's worker
name, its limits and which kinds it runs are decided here.
"""

from __future__ import annotations

import os
import socket

from bot.config import Settings
from core.clock import WallClock
from core.jobs.runner import JobRunner
from core.turn.delivery import Outbox
from memory.turns.store import SqlStorage


def worker_name(storage: SqlStorage) -> str:
    """This process among the replicas: its PostgreSQL replica id, else host and pid."""
    replica = storage.database.replica
    return replica or f"{socket.gethostname()}:{os.getpid()}"[:64]


def build_job_runner(
    settings: Settings, storage: SqlStorage, outbox: Outbox, clock: WallClock
) -> JobRunner:
    """The runner, with no kinds yet: each feature registers its own (`register`)."""
    config = settings.jobs
    return JobRunner(
        storage.jobs,
        {},
        outbox.send_proactive,  # the one door out
        worker=worker_name(storage),
        max_running=config.max_running,
        lease_s=config.lease_s,
        clock=clock,
    )
