"""How much of each request repeats the previous request of the chat, byte for byte.

Providers bill the prefix a request shares with an earlier one at a fraction of the price
(prompt caching); the first differing byte ends the cheap part. This drives the daemon's
own wiring (App.build(), tests/rig.py) against the fake model server, with an injected
clock, through two chats:

- a private chat whose turns are minutes apart (the clock crosses minute boundaries);
- a group where Ann, Bob and Cai take turns (each with their own memories).

For each request after the first it renders both requests as ChatML (how templates lay a
request out as one text) and measures the identical prefix: as a share of the previous
request's part up to the end of its history (the part that can repeat; the target is a
median of at least 97 %), and as a share of the whole previous request.

"Before" is an earlier revision (default: the parent of the first commit of issue 26,
`--before REV`), extracted with `git archive` into a temporary directory and measured by
this same script in a child process with that tree first on the path; "after" is this
tree. `--measure` prints one run's numbers as JSON (what the child does).

    .venv/bin/python bench/cache_bench.py [--before a8ed476]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BEFORE = "a8ed476"
START = datetime(2026, 3, 2, 9, 58, 10, tzinfo=UTC)
TARGET = 0.97


def chatml(messages: list[dict[str, Any]]) -> str:
    """The request as one text, the way a ChatML template lays it out."""
    out = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, sort_keys=True)
        out.append(f"<|im_start|>{message['role']}\n{content}<|im_end|>\n")
    return "".join(out)


def history_end(messages: list[dict[str, Any]]) -> int:
    """Messages up to the end of the history: all but the current message and, when
    there is one, this turn's own system message right before it."""
    end = len(messages) - 1
    if end > 1 and messages[end - 1]["role"] == "system":
        end -= 1
    return end


def shares(requests: list[list[dict[str, Any]]]) -> tuple[list[float], list[float]]:
    """Per consecutive pair: repeated share of the previous request's part up to the end
    of its history, and of the whole previous request."""
    of_history, of_whole = [], []
    for before, after in zip(requests, requests[1:], strict=False):
        whole, following = chatml(before), chatml(after)
        part = len(chatml(before[: history_end(before)]))
        shared = len(os.path.commonprefix([whole, following]))
        of_history.append(min(shared, part) / part)
        of_whole.append(shared / len(whole))
    return of_history, of_whole


async def measure() -> dict[str, Any]:
    """Both scenarios with whatever `bot`, `core` and `tests` are first on the path."""
    from bot.wiring.app import Seams
    from memory.turns.store import open_storage
    from tests.fakes.openai_server import FakeOpenAI, echo_last_user
    from tests.rig import msg, settings_for, turn_path

    now = [START]

    def clock() -> datetime:
        return now[0]

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        storage = await open_storage(f"sqlite:///{tmp}/bench.sqlite")
        try:
            for uid, fact in (("1", "Ann keeps bees"), ("2", "Bob plays the tuba")):
                await storage.add_memory("telegram", uid, fact, f"telegram:{uid}")
            await storage.add_memory("telegram", "9", "Dee takes tea black", "telegram:9")
            async with FakeOpenAI(echo_last_user) as model:
                settings = settings_for(Path(tmp), None, model, groups={"wake_words": ["bot"]})
                async with turn_path(settings, Seams(storage=storage, clock=clock)) as (_, path):
                    # The earlier revision had no clock seam for the time block: set it here.
                    path.processor._context.system.clock = clock  # type: ignore[attr-defined]
                    dispatch = path.dispatcher
                    for n in range(12):
                        said = msg(f"question {n} about the weather", sender="9", name="Dee")
                        await dispatch(replace_id(said, f"p{n}", "900"))
                        now[0] += timedelta(minutes=2, seconds=30)
                    private = [list(r["messages"]) for r in model.requests]
                    model.requests.clear()
                    people = [("1", "Ann"), ("2", "Bob"), ("3", "Cai")]
                    for n in range(12):
                        uid, name = people[n % 3]
                        said = msg(f"bot, {name} asks thing {n}", sender=uid, name=name, group=True)
                        await dispatch(replace_id(said, f"g{n}", "-77"))
                        now[0] += timedelta(seconds=50)
                    group = [list(r["messages"]) for r in model.requests]
        finally:
            await storage.close()
    for name, requests in (("private", private), ("group", group)):
        of_history, of_whole = shares(requests)
        results[name] = {
            "requests": len(requests),
            "history_median": statistics.median(of_history),
            "history_min": min(of_history),
            "whole_median": statistics.median(of_whole),
        }
    return results


def replace_id(message: Any, mid: str, chat: str) -> Any:
    from dataclasses import replace

    return replace(message, message_id=mid, chat_id=chat)


def measure_before(rev: str) -> dict[str, Any]:
    from bench.turn_pair import checkout  # this tree's bench (sys.path has ROOT by now)

    with tempfile.TemporaryDirectory() as tmp:
        checkout(rev, Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp}
        out = subprocess.run(
            [sys.executable, __file__, "--measure"],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp,
            env=env,
        ).stdout
    return json.loads(out.strip().splitlines()[-1])


def pct(value: float) -> str:
    return f"{value:.1%}"


def report(before: dict[str, Any], after: dict[str, Any], rev: str, seconds: float) -> str:
    from bench.results import cpu_model, load_average

    lines = [
        "## Prompt-cache prefix (bench/cache_bench.py)",
        "",
        f"Command: `.venv/bin/python bench/cache_bench.py --before {rev}`  ",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {sys.version.split()[0]}; "
        f"run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds:.0f} s; load average "
        f"(1 min) {load_average()} at the end.",
        "",
        "The daemon's own wiring (App.build()) against the fake model server, SQLite, an "
        "injected clock. *Private*: Dee's private chat, 12 turns 2.5 minutes apart. *Group*: "
        "Ann, Bob and Cai take turns, 12 turns 50 s apart; Ann, Bob and Dee have memories. "
        "Each request after the first is rendered as ChatML and compared with the previous "
        "request of its chat: the identical prefix as a share of the previous request up to "
        "the end of its history (what can repeat), and of the whole previous request. "
        f"*Before* is revision {rev} (time, session and memory at the top of the system "
        "prompt); *after* is this tree (they follow the history).",
        "",
        "| chat | revision | requests | repeated, of the part up to the end of history: "
        "median | min | repeated, of the whole previous request: median |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for chat in ("private", "group"):
        for label, run in (("before", before), ("after", after)):
            r = run[chat]
            lines.append(
                f"| {chat} | {label} | {r['requests']} | {pct(r['history_median'])} | "
                f"{pct(r['history_min'])} | {pct(r['whole_median'])} |"
            )
    ok = all(after[c]["history_median"] >= TARGET for c in ("private", "group"))
    lines += [
        "",
        "| target | result |",
        "|---|---|",
        f"| median ≥ {TARGET:.0%} of the previous request up to the end of its history "
        f"repeated, private chat across minutes and rotating group senders | "
        f"**{'PASS' if ok else 'FAIL'}** |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measure", action="store_true", help="print this tree's numbers")
    parser.add_argument("--before", default=DEFAULT_BEFORE, help="the earlier revision")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(measure())))
        return
    sys.path.insert(0, str(ROOT))
    started = time.monotonic()
    before = measure_before(args.before)
    after = asyncio.run(measure())
    text = report(before, after, args.before, time.monotonic() - started)
    print(text)
    from bench.results import write_section

    write_section("cache-bench", text)


if __name__ == "__main__":
    main()
