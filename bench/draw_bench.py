"""Pictures under load: N `/draw` requests at once against a provider that takes S seconds
each, while people in other chats talk to the bot.

Measured: every picture delivered exactly once (one photo per job, counted at the
channel), how many provider calls were made (each is paid), and the p50 / p95 of plain
turns in other chats while the pictures are being drawn, against the same turns on an
idle daemon. The daemon is `App.build()` from a Settings, on the fake model server
(tests/fakes/openai_server.py), SQLite in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from bot.wiring.app import App  # noqa: E402
from core.messages import OutboundMessage, Sent  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.rig import msg, settings_for  # noqa: E402

SECTION = "draw-bench"


class Recorder:
    """A Telegram-shaped channel that takes every message at once and shows pictures."""

    name = "telegram"
    pushes = True
    shows_images = True

    def __init__(self) -> None:
        self.pictures: Counter[str] = Counter()  # chat id -> photos sent

    async def send(self, message: OutboundMessage) -> Sent:
        if message.image is not None:
            self.pictures[message.chat_id] += 1
        return Sent(("1",))

    def restore_image(self, locator: str, mime: str | None, name: str) -> None:
        return None


async def turn_times(
    app: App, count: int, tag: str, until: Callable[[], bool] = lambda: True
) -> list[float]:
    """At least `count` plain turns, one after another, each in a chat of its own, and
    more until `until()` (ms each)."""
    assert app.processor is not None
    times: list[float] = []
    for n in itertools.count():
        if n >= count and until():
            break
        chat = f"{tag}{n}"
        began = time.perf_counter()
        await app.processor.handle(msg(f"hello number {n}", chat=chat, sender=chat))
        times.append((time.perf_counter() - began) * 1000)
    return times


async def run(draws: int, latency_s: float, turns: int) -> dict[str, float]:
    async with FakeOpenAI(reply="Hello!") as fake:
        fake.image_latency_s = latency_s
        with tempfile.TemporaryDirectory() as folder:
            settings = settings_for(
                Path(folder),
                f"sqlite:///{folder}/bench.sqlite",
                fake,
                images={
                    "enabled": True,
                    "allow": "everyone",
                    "max_per_user_per_day": 0,
                    "max_per_chat_per_day": 0,
                },
                jobs={"max_running": draws},  # every picture in flight at once
            )
            app = App(settings)
            path = await app.build()
            recorder = Recorder()
            app.routes.add(recorder)
            stop = asyncio.Event()
            try:
                await turn_times(app, 20, "warm")
                window = time.perf_counter() + latency_s  # as long as the drawing takes
                idle = await turn_times(app, turns, "idle", lambda: time.perf_counter() > window)
                for n in range(draws):
                    reply = await path.commands.handle(
                        msg(f"/draw picture {n}", chat=f"d{n}", sender=f"d{n}")
                    )
                    assert reply.text.startswith("🎨 drawing…"), reply.text
                assert app.jobs is not None
                runner = asyncio.create_task(app.jobs.run(stop))
                began = time.perf_counter()
                while len(fake.image_requests) < draws:  # noqa: ASYNC110 (the fake's count)
                    await asyncio.sleep(0.01)
                # Turns while the pictures are drawn and until the last one is sent.
                busy = await turn_times(
                    app, turns, "busy", lambda: sum(recorder.pictures.values()) >= draws
                )
                all_in = time.perf_counter() - began
                window = time.perf_counter() + latency_s
                after = await turn_times(app, turns, "after", lambda: time.perf_counter() > window)
                await asyncio.sleep(1.5)  # a pass more: nothing is sent twice
                stop.set()
                await runner
            finally:
                stop.set()
                await app.stop(2.0)
    twice = sum(1 for count in recorder.pictures.values() if count > 1)
    return {
        "idle_p50": statistics.median(idle),
        "idle_p95": statistics.quantiles(idle, n=20)[-1],
        "busy_p50": statistics.median(busy),
        "busy_p95": statistics.quantiles(busy, n=20)[-1],
        "after_p50": statistics.median(after),
        "idle_turns": len(idle),
        "after_turns": len(after),
        "delivered": len(recorder.pictures),
        "twice": twice,
        "provider_calls": len(fake.image_requests),
        "all_in_s": all_in,
        "busy_turns": len(busy),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--latency", type=float, default=5.0)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    r = asyncio.run(run(args.draws, args.latency, args.turns))
    ratio = r["busy_p50"] / r["idle_p50"]
    text = (
        f"{args.draws} `/draw` at once, provider {args.latency:g} s per picture, all "
        f"{args.draws} in flight ([jobs] max_running = {args.draws}): "
        f"{r['delivered']:.0f} delivered, {r['twice']:.0f} twice, "
        f"{r['provider_calls']:.0f} provider calls, all in after {r['all_in_s']:.1f} s. "
        f"Plain turns in other chats, one after another, for {args.latency:g} s each: idle "
        f"before ({r['idle_turns']:.0f} turns) p50 {r['idle_p50']:.1f} ms (p95 "
        f"{r['idle_p95']:.1f}); from the draws until the last picture was sent "
        f"({r['busy_turns']:.0f}) p50 {r['busy_p50']:.1f} ms (p95 {r['busy_p95']:.1f}), "
        f"{ratio:.2f}x idle; idle after ({r['after_turns']:.0f}) p50 {r['after_p50']:.1f} ms. "
        f"{cpu_model()}, load average {load_average()}.\n"
    )
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
