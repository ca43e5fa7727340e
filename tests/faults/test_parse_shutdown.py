"""The real daemon reading hostile documents: its memory stays small, SIGTERM still ends it.

Before issue 35 a DOCX whose ZIP headers lied took the daemon past 2 GB, and a parse ran
in a thread nobody could stop: the turn was cancelled at the end of the drain, but the
thread kept the process alive until pypdf gave up (64.5 s measured). Now a DOCX is
inflated in counted steps and every parse is a child process, killed with its turn.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from tests.fakes.files import make_lying_docx, make_spinning_pdf
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, private_chat, user
from tests.faults.daemon import Daemon, daemon_env, free_port

pytestmark = pytest.mark.faults
ALICE = user(1001, "Alice")
GRACE_S = 5  # [bot] shutdown_grace_s: the parse outlives it by minutes
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MIB = 1024 * 1024


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024


def document(tg: FakeTelegram, data: bytes, name: str, mime: str) -> dict[str, object]:
    file_id = tg.add_file(data)
    return {
        "file_id": file_id,
        "file_unique_id": f"u-{file_id}",
        "file_name": name,
        "mime_type": mime,
        "file_size": len(data),
    }


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


async def test_hostile_documents_keep_the_daemon_small_and_sigterm_ends_their_parse(
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
            bomb = make_lying_docx(1000)  # 1 MB; inflates to 1 GB, headers claim 1 kB
            tg.push_message(
                private_chat(ALICE),
                ALICE,
                None,
                caption="read this",
                document=document(tg, bomb, "report.docx", DOCX),
            )
            await tg.wait_for("sendMessage", 1, within_s=60)
            assert "could not be read" in str(model.requests[-1]["messages"][-1]["content"])
            peak = peak_rss(daemon.proc.pid)
            print(f"daemon peak RSS after the DOCX bomb: {peak / MIB:.0f} MiB")
            assert peak < 300 * MIB, daemon.log()
            pdf = make_spinning_pdf()  # 12 kB; minutes of pypdf CPU
            tg.push_message(
                private_chat(ALICE),
                ALICE,
                None,
                caption="and this",
                document=document(tg, pdf, "report.pdf", "application/pdf"),
            )
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
            assert len(model.requests) == 1, "the PDF's turn was cancelled at the grace"
        finally:
            await daemon.close()


def _gone(pid: int) -> bool:
    """Exited (a zombie not yet reaped by init counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True
