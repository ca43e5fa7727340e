"""The core knows storage only by its Protocols (core/storage.py): importing the turn path
loads no storage implementation. A fresh interpreter, since this one has SQLAlchemy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_turn_path_loads_no_sqlalchemy() -> None:
    probe = (
        "import sys, core.turn.processor, core.usage.quota, core.usage.meter, core.turn.delivery\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy')\n"
        "print(loaded[:3])\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
