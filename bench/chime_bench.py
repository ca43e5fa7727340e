"""Chime-in budget (issue 37): decision calls for a busy group vs the promised bound.

200 unaddressed group messages, one every 2 s on a simulated clock (no sleeping), go
through the real chime-in (core/turn/chiming.py: its windows, the stored history on
SQLite, the model over HTTP through the openai SDK to the fake model server). The fake
model speaks only when the batch holds an unanswered question ("anyone know ...?") and
answers `[silent]` otherwise. Counted: decision calls vs the bound messages x interval /
gap + 1, messages posted vs the decisions where the model chose to speak, and two bot
messages in a row (must be 0). Reference: deciding on every message (one call each).

Run: `.venv/bin/python bench/chime_bench.py` (a few seconds; rewrites its RESULTS.md
section).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from core.llm.endpoint import OpenAIProvider  # noqa: E402
from core.messages import ChatType, InboundMessage, OutboundMessage  # noqa: E402
from core.text.tokens import get_counter  # noqa: E402
from core.turn.chime import DEFAULT_GAP_S, ChimeLevel, ChimeWindows  # noqa: E402
from core.turn.chiming import SILENT, ChimeIn  # noqa: E402
from memory.turns.store import open_storage  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402

SECTION = "chime-bench"
MESSAGES = 200
EVERY_S = 2.0
QUESTION = "anyone know when the ferry leaves?"
ASKED_AT = (30, 95, 96, 150)  # the messages that are an unanswered question


SPOKEN = "It leaves at 6:10 from pier 2."
CHOSE_TO_SPEAK: list[int] = []  # one entry per decision the fake model answered with words


def model_reply(body: dict[str, Any]) -> str:
    """Speak when the talk since the bot's last message holds a question nobody answered."""
    talk = body["messages"][1:]
    roles = [m["role"] for m in talk]
    last_bot = len(roles) - roles[::-1].index("assistant") if "assistant" in roles else 0
    if any(QUESTION in str(m.get("content")) for m in talk[last_bot:]):
        CHOSE_TO_SPEAK.append(1)
        return SPOKEN
    return SILENT


class Door:
    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send_proactive(self, outbound: OutboundMessage) -> None:
        self.sent.append(outbound)


async def run(level: ChimeLevel, tmp: str) -> dict[str, Any]:
    now = [0.0]
    CHOSE_TO_SPEAK.clear()
    storage = await open_storage(f"sqlite+aiosqlite:///{tmp}/chime-{level}.sqlite")
    counter = get_counter("estimate")
    try:
        async with FakeOpenAI(reply=model_reply, model="chime-model") as fake:
            model = OpenAIProvider(fake.base_url, "sk-bench", "chime-model", max_retries=0)
            door = Door()
            windows = ChimeWindows(lambda: now[0])
            chime = ChimeIn(windows=windows, store=storage, model=model, door=door, counter=counter)
            started = time.perf_counter()
            spoke_at = []
            for n in range(MESSAGES):
                now[0] = n * EVERY_S
                text = QUESTION if n in ASKED_AT else f"small talk number {n}"
                message = InboundMessage(
                    platform="qq",
                    chat_id="group:1",
                    chat_type=ChatType.GROUP,
                    sender_id=str(100 + n % 7),
                    sender_name=f"user{n % 7}",
                    text=text,
                    message_id=str(n),
                    timestamp=datetime.fromtimestamp(1_800_000_000 + now[0], UTC),
                )
                await storage.add_turn(_context_turn(message, counter))
                if await chime.heard(message, level):
                    spoke_at.append(n)
            wall = time.perf_counter() - started
            await model.close()
            requests = fake.total_requests
        turns = await storage.recent_turns("qq", "group:1", MESSAGES * 2)
    finally:
        await storage.close()
    roles = [t.role for t in turns]
    twice = sum(1 for a, b in zip(roles, roles[1:], strict=False) if a == b == "assistant")
    gap = DEFAULT_GAP_S[level]
    return {
        "level": level,
        "gap": gap,
        "decisions": windows.decisions,
        "requests": requests,
        "bound": MESSAGES * EVERY_S / gap + 1,
        "posted": len(door.sent),
        "chose": len(CHOSE_TO_SPEAK),
        "spoke_at": spoke_at,
        "twice": twice,
        "wall": wall,
    }


def _context_turn(message: InboundMessage, counter: Any) -> Any:
    from core.inject import inject
    from core.turn.turns import TurnFactory

    content = inject(message.sender_name, message.sender_id, message.text, [])
    return TurnFactory(counter).user(message, content, kind="context")


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "## Chime-in budget (bench/chime_bench.py)",
        "",
        "Command: `.venv/bin/python bench/chime_bench.py`  ",
        f"Machine: {cpu_model()}; run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average (1 min) {load_average()}.",
        "",
        f"{MESSAGES} unaddressed messages in one QQ group, one every {EVERY_S:g} s on a "
        "simulated clock, through the real chime-in (windows, history on SQLite, the "
        "decision over HTTP to the fake model server). The fake model speaks only when the "
        f"newest talk holds an unanswered question (messages {', '.join(map(str, ASKED_AT))}) "
        "and answers `[silent]` otherwise. Reference: a decision on every message "
        f"({MESSAGES} calls). Target: decision calls ≤ messages × interval / gap + 1; posts "
        "only where the model chose to speak; never two bot messages in a row.",
        "",
        "| chime_in | gap (s) | decision calls | bound | vs every message | model chose "
        "to speak | posted (after message) | two in a row | result |",
        "|---|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for row in rows:
        ok = row["requests"] <= row["bound"] and row["twice"] == 0
        ok = ok and row["requests"] == row["decisions"] and row["posted"] == row["chose"]
        posted = ", ".join(f"#{n}" for n in row["spoke_at"]) or "none"
        lines.append(
            f"| {row['level']} | {row['gap']:g} | {row['requests']} | {row['bound']:.2f} | "
            f"{row['requests'] / MESSAGES:.3f}x | {row['chose']} | {row['posted']} ({posted}) | "
            f"{row['twice']} | **{'PASS' if ok else 'FAIL'}** |"
        )
    lines += [
        "",
        "A decision reads the batch since the last one in the chat's stored history, so a "
        "question asked between two decisions is still seen by the next (within its gap). "
        "The window after a chime-in passes without a call. Wall time for all rows: "
        f"{sum(r['wall'] for r in rows):.1f} s.",
        "",
    ]
    return "\n".join(lines)


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rows = [await run("low", tmp), await run("normal", tmp)]
    text = report(rows)
    print(text)
    write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
