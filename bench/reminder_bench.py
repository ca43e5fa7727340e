"""What firing reminders costs: one scheduler pass over N due reminders on SQLite.

Each occurrence is a claim transaction (UPDATE + INSERT), a send into a channel that
answers at once, and the mark (one UPDATE), exactly as the daemon does it; the numbers
are the storage's share of delivering reminders on time (`[reminders] tick_s` is 1 s,
so a pass must stay well under it for the reminders due in one second).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from core.messages import OutboundMessage, Sent  # noqa: E402
from core.reminders.scheduler import Scheduler  # noqa: E402
from core.turn.delivery import ChannelRoutes, Outbox  # noqa: E402
from memory.reminders.types import Reminder, ReminderDraft  # noqa: E402
from memory.turns.store import open_storage  # noqa: E402

SECTION = "reminder-bench"
START = datetime(2026, 3, 28, 10, 0, tzinfo=UTC)


class Instant:
    name = "telegram"

    async def send(self, message: OutboundMessage) -> Sent:
        return Sent(("1",))

    def restore_image(self, locator: str, mime: str | None, name: str) -> None:
        return None


async def allow(reminder: Reminder) -> str | None:
    return None


async def no_task(message: object) -> str | None:
    return None


async def one_pass(count: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        storage = await open_storage(f"sqlite:///{folder}/bench.sqlite")
        try:
            for n in range(count):
                await storage.reminders.add(
                    ReminderDraft(
                        kind="remind", platform="telegram", chat_id=str(1000 + n),
                        chat_type="private", owner_id=str(1000 + n), owner_name="x",
                        text="stretch", rule="every 60s", zone="UTC",
                        first_due=START + timedelta(seconds=1),
                    ),
                    max_per_user=10, max_per_chat=10,
                )  # fmt: skip
            routes = ChannelRoutes()
            routes.add(Instant())
            scheduler = Scheduler(
                storage.reminders,
                send=Outbox(routes, storage.intake).send_proactive,
                run_task=no_task,  # type: ignore[arg-type]
                task_outcome=no_task,  # type: ignore[arg-type]
                gate=allow,
                clock=lambda: START + timedelta(seconds=2),
            )
            began = time.perf_counter()
            done = await scheduler.tick()
            elapsed = time.perf_counter() - began
            assert done == count, done
            return elapsed
        finally:
            await storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    elapsed = asyncio.run(one_pass(args.count))
    per = elapsed / args.count * 1000
    text = (
        f"One scheduler pass over {args.count} due reminders (SQLite, claim + send + mark "
        f"each): {elapsed:.2f} s, {per:.1f} ms per reminder, {args.count / elapsed:.0f} "
        f"reminders/s. {cpu_model()}, load average {load_average()}.\n"
    )
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
