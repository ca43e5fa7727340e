"""A fork bomb stays inside its run, on each engine this machine can run: the run is
stopped at its time limit, a run in another chat is answered meanwhile, and no process
of the bomb outlives it.

The bomb's processes are found by a marker in their command line (a fork keeps the
parent's), so the test sees them on the host without knowing their pids.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.admins import Admins
from core.messages import OutboundMessage
from core.sandbox.bwrap import BwrapEngine
from core.sandbox.folders import ChatFolders
from core.sandbox.run import RunLimits
from core.sandbox.service import Sandbox, SandboxRules
from core.tools.registry import ToolContext
from tests.sandbox.support import ENGINES, ready

OWNER = "telegram:1000"


def ctx(chat: str) -> ToolContext:
    return ToolContext.for_person("telegram", chat, "1000", "Op", None)


@pytest.fixture(params=ENGINES)
async def sandbox(request: pytest.FixtureRequest) -> AsyncIterator[Sandbox]:
    # A folder `nobody` can reach, so a root daemon's bwrap runs drop to it and the
    # process limit applies (the kernel exempts root from it).
    with tempfile.TemporaryDirectory(prefix="chatterd-bomb-") as tmp:
        os.chmod(tmp, 0o711)
        root = Path(tmp) / "chats"
        engine = await ready(request.param, root)
        owner = engine.run_as if isinstance(engine, BwrapEngine) else None
        if isinstance(engine, BwrapEngine) and owner is None:
            pytest.skip("bwrap runs here are not dropped to another user: no process limit")
        folders = ChatFolders(root, keep_hours=24, owner=owner)
        limits = RunLimits(timeout_s=4, memory_mb=256, max_processes=16)
        rules = SandboxRules(allow="admins", admins=Admins(frozenset({OWNER})), max_running=2)
        box = Sandbox(engine, folders, limits, rules)

        async def send(message: OutboundMessage) -> bool:
            return True

        box.attach(send)
        yield box


def bomb_processes(marker: str) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    count += 1
            except OSError:
                continue
    return count


async def test_a_fork_bomb_is_stopped_and_leaves_nothing_behind(sandbox: Sandbox) -> None:
    marker = f"bomb-{uuid.uuid4().hex}"
    bomb = (
        f"# {marker}\nimport os\nprint('started', flush=True)\n"
        "while True:\n"
        "    try:\n        os.fork()\n"
        "    except (OSError, AttributeError):\n        pass\n"
    )
    started = time.monotonic()
    running = asyncio.ensure_future(sandbox.run(bomb, ctx("bomb")))
    while bomb_processes(marker) == 0:  # the marker finds the run's processes
        assert not running.done(), "the bomb's processes were never seen"
        await asyncio.sleep(0.01)
    try:
        other = await sandbox.run("print('still here')", ctx("other"))
        answered_meanwhile = not running.done()
    finally:
        seen = await running  # the bomb is stopped whatever happened above
    took = time.monotonic() - started
    assert "Stopped: the run took longer than its limit of 4 s." in seen.text
    assert not seen.ok and took < 4 + 25  # the limit, plus a start and a kill
    assert bomb_processes(marker) == 0
    if not other.ok and isinstance(sandbox.engine, BwrapEngine):
        # Every bwrap run is `nobody`, and RLIMIT_NPROC counts all of nobody's processes:
        # one chat's bomb that fills the limit keeps another chat's run from starting.
        pytest.xfail(f"bwrap runs share one process limit (one uid): {other.text[:200]!r}")
    assert "still here" in other.text and other.ok
    assert answered_meanwhile
