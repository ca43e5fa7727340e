"""The real daemon reading a PDF that keeps pypdf busy for minutes: SIGTERM still ends it.

Before issue 35 the parse ran in a thread nobody could stop: the turn was cancelled at
the end of the drain, but the thread kept the process alive until pypdf gave up (64.5 s
measured). Now the parse is a child process, killed when its turn is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.fakes.files import make_spinning_pdf
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, private_chat, user
from tests.faults.daemon import Daemon, daemon_env, free_port

pytestmark = pytest.mark.faults
ALICE = user(1001, "Alice")
GRACE_S = 5  # [bot] shutdown_grace_s: the parse outlives it by minutes


def parse_children(daemon_pid: int) -> list[int]:
    """Parse workers started by this daemon (their argv names the daemon's pid)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"core.media.parse_worker" in argv and str(daemon_pid).encode() in argv[-3:]:
            found.append(int(entry))
    return found


async def test_sigterm_during_a_spinning_parse_exits_and_leaves_no_parser(
    tmp_path: Path, database_url: str
) -> None:
    async with FakeOpenAI("read it") as model, FakeTelegram() as tg:
        port = free_port()
        env = daemon_env(
            tmp_path,
            storage_url=database_url,
            model_url=model.base_url,
            http_port=port,
            extra={
                "CHATTERD_TELEGRAM__ENABLED": "true",
                "CHATTERD_TELEGRAM__TOKEN": tg.token,
                "CHATTERD_TELEGRAM__API_BASE_URL": tg.root,
                "CHATTERD_BOT__SHUTDOWN_GRACE_S": str(GRACE_S),
            },
        )
        daemon = Daemon(env, tmp_path / "daemon.log", port)
        try:
            await daemon.start(within_s=120)
            assert daemon.proc is not None
            pdf = make_spinning_pdf()  # 12 kB; minutes of pypdf CPU
            file_id = tg.add_file(pdf)
            doc = {
                "file_id": file_id,
                "file_unique_id": f"u-{file_id}",
                "file_name": "report.pdf",
                "mime_type": "application/pdf",
                "file_size": len(pdf),
            }
            tg.push_message(private_chat(ALICE), ALICE, None, caption="read this", document=doc)
            for _ in range(600):  # the parse has started (a loaded machine is slow)
                if parse_children(daemon.proc.pid):
                    break
                await asyncio.sleep(0.1)
            children = parse_children(daemon.proc.pid)
            await asyncio.sleep(1.0)  # well into the parse
            started = time.monotonic()
            code = await daemon.terminate(within_s=30)  # the documented promise
            took = time.monotonic() - started
            print(f"SIGTERM during a parse: exited in {took:.1f} s (grace {GRACE_S} s)")
            assert code == 0, daemon.log()
            assert children, daemon.log()  # the parse ran in a child, not a thread
            assert all(_gone(pid) for pid in children), daemon.log()  # killed, not orphaned
            assert model.requests == [], "the turn was cancelled at the grace, not answered"
        finally:
            await daemon.close()


def _gone(pid: int) -> bool:
    """Exited (a zombie not yet reaped by init counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True
