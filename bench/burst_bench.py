"""A burst of four messages 300 ms apart: how many model calls, replies, and how soon.

The whole daemon (bot.wiring.app.App with the real Telegram channel) runs in this process
against the fake Bot API and a fake model. One sender sends four messages 300 ms apart
in a group (each @-mentioning the bot) and in a private chat, with the default
`burst_ms` (groups 1500, private 1000). Measured per burst: model requests, replies
sent, and the time from the last message to the reply's first text in the chat. The
issue's target: 1 request, 1 reply, first text within `burst_ms` + 0.5 s.

Reference: the same bursts with `burst_ms = 0` (each message answered on its own).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from bench.stream_bench import settings as daemon_settings  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.wiring.app import App  # noqa: E402
from bot.wiring.registry import ChannelDeps  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import (  # noqa: E402
    FakeTelegram,
    entity,
    group_chat,
    private_chat,
    user,
)

SECTION = "burst-bench"
BOT = "chatterd_bench_bot"
MESSAGES = 4
GAP_S = 0.3
WINDOW_MS = {"group": 1500, "private": 1000}  # the defaults
SHOWN = ("sendMessageDraft", "sendMessage", "editMessageText")


@dataclass
class Run:
    requests: int
    replies: int
    first_text_s: float  # from the last message of the burst to the next text shown


def settings(tmp: Path, model: FakeOpenAI, tg: FakeTelegram, merge: bool) -> Settings:
    """stream_bench's daemon (streaming on, as by default), bursts at their defaults or off."""
    config = daemon_settings(tmp, model, tg, "auto")
    if merge:
        return config
    off = {"burst_ms": 0}
    return config.model_copy(
        update={
            "groups": config.groups.model_copy(update=off),
            "private": config.private.model_copy(update=off),
        }
    )


async def one_burst(tg: FakeTelegram, model: FakeOpenAI, chat: dict[str, Any], who: dict) -> Run:
    asked = len(model.requests)
    before = {m: len(tg.calls_of(m)) for m in SHOWN}
    last_at = 0.0
    for i in range(MESSAGES):
        if i:
            await asyncio.sleep(GAP_S)
        words = f"@{BOT} part {i + 1} of my question"
        last_at = time.monotonic()
        tg.push_message(chat, who, words, entities=[entity("mention", words, f"@{BOT}")])

    def replies() -> list[Any]:
        sent = tg.calls_of("sendMessage")[before["sendMessage"] :]
        return [c for c in sent if c.params["chat_id"] == chat["id"]]

    deadline = time.monotonic() + 60
    while not replies():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no reply in chat {chat['id']}")
        await asyncio.sleep(0.01)
    # Give anything else this burst would cause (more requests, more replies) time to show.
    await asyncio.sleep(WINDOW_MS["group"] / 1000 + 2.0)
    shown = [
        c.at
        for m in SHOWN
        for c in tg.calls_of(m)[before[m] :]
        if c.params.get("chat_id") == chat["id"]
    ]
    return Run(
        requests=len(model.requests) - asked,
        replies=len(replies()),
        first_text_s=min(at for at in shown if at >= last_at) - last_at,
    )


async def measure(merge: bool, rounds: int) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {"group": [], "private": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            FakeOpenAI(reply="Here is the whole answer.") as model,
            FakeTelegram(username=BOT) as tg,
        ):
            config = settings(Path(tmp), model, tg, merge)
            deps = ChannelDeps(config, dict, io.StringIO(), io.StringIO(), "b")
            async with App(deps.settings, mode="run", deps=deps):
                for i in range(rounds):
                    who = user(4000 + i, f"Typist{i}")
                    group = group_chat(-1008000 - i, f"Bench group {i}")
                    runs["group"].append(await one_burst(tg, model, group, who))
                    runs["private"].append(await one_burst(tg, model, private_chat(who), who))
    return runs


def report(merged: dict[str, list[Run]], alone: dict[str, list[Run]], rounds: int) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Bursts (bench/burst_bench.py)\n",
        "Command: `.venv/bin/python bench/burst_bench.py`  ",
        f"Machine: {cpu_model()}; run {now}; load average (1 min) {load_average()}.\n",
        f"The daemon with the real Telegram channel against the fake Bot API and a fake model "
        f"that answers at once. One sender sends {MESSAGES} messages {GAP_S * 1000:.0f} ms apart "
        f"(in a group each @-mentions the bot); {rounds} bursts per row. *First text*: from "
        "the burst's last message to the first reply text the chat shows after it (median "
        "and worst; with `burst_ms = 0` the first three messages were answered before it). "
        "Target: 1 request, 1 reply, first text within `burst_ms` + 0.5 s. Reference: "
        "`burst_ms = 0` (each message answered alone), same process.\n",
        "| chat | burst_ms | model requests | replies | first text (s) | worst (s) | target (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in ("group", "private"):
        window = WINDOW_MS[kind]
        for label, runs in ((str(window), merged[kind]), ("0 (reference)", alone[kind])):
            first = [r.first_text_s for r in runs]
            requests = max(r.requests for r in runs)
            replies = max(r.replies for r in runs)
            target = f"{window / 1000 + 0.5:.1f}" if label == str(window) else "-"
            lines.append(
                f"| {kind} | {label} | {requests} | {replies} | "
                f"{statistics.median(first):.2f} | {max(first):.2f} | {target} |"
            )
    ok = all(
        r.requests == 1 and r.replies == 1 and r.first_text_s <= WINDOW_MS[k] / 1000 + 0.5
        for k, runs in merged.items()
        for r in runs
    )
    lines.append("")
    lines.append(
        ("Every burst met the target. " if ok else "Some burst MISSED the target. ")
        + "The wait after the last message is the burst window itself (the sender might "
        "still be typing); the model call and the send add the rest.\n"
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A burst answered once (see module doc).")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    merged = asyncio.run(measure(True, args.rounds))
    alone = asyncio.run(measure(False, args.rounds))
    text = report(merged, alone, args.rounds)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
