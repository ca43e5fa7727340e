"""`chatterd jobs list [--state STATE]` and `chatterd jobs cancel <id>`.

For the operator at the machine: the rows `/jobs` reads (memory/jobs/store.py), every chat at
once, and cancelling any of them, as an admin would in the chat.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from bot.cli.stored import add_cancel_parser, opened_store, typed_id
from bot.commands.jobs import job_line
from bot.config import Settings
from memory.jobs.types import JOB_STATES

OPERATOR = "the operator"


def _state(text: str) -> str:
    if text not in JOB_STATES:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(JOB_STATES)}")
    return text


def add_jobs_parser(sub: Any) -> None:
    jobs = sub.add_parser("jobs", help="work that outlives a turn (/jobs)")
    actions = jobs.add_subparsers(dest="jobs_command", required=True)
    listing = actions.add_parser("list", help="the newest 50 jobs of every chat")
    listing.add_argument(
        "--state",
        type=_state,
        metavar="STATE",
        help=f"only jobs in this state ({', '.join(JOB_STATES)})",
    )
    add_cancel_parser(actions, "cancel a job that has not ended", listed_by="/jobs")


async def run_jobs_command(args: argparse.Namespace, settings: Settings) -> int:
    async with opened_store(settings) as store:
        if args.jobs_command == "cancel":
            number = typed_id(args.id)
            job = await store.jobs.get(number) if number is not None else None
            if job is None:
                print(f"chatterd jobs: no job {args.id!r}", file=sys.stderr)
                return 1
            if not await store.jobs.cancel(job, OPERATOR, datetime.now(UTC)):
                print(f"chatterd jobs: job #{job.id} has already ended", file=sys.stderr)
                return 1
            print(f"cancelled job #{job.id} ({job.kind}) in {job.chat_key}")
            return 0
        found = await store.jobs.recent(state=args.state)
    if not found:
        print("no jobs")
        return 0
    now = datetime.now(UTC)
    for job in found:
        print(f"{job.chat_key}  {job_line(job, now)}")
    return 0
