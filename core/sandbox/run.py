"""What a run is given and what it gives back, and the Protocol every engine keeps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# The guest's view: its chat's folder is its working directory at this path.
GUEST_DIR = "/work"
# Run as the guest's program: the code arrives as argv[1] (never spliced into source),
# and the working directory is the chat's folder whatever the engine's default.
PRELUDE = (
    "import os, sys\n"
    f"os.chdir({GUEST_DIR!r})\n"
    "_code = sys.argv[1]\n"
    "del sys.argv[1]\n"
    "exec(compile(_code, '<code>', 'exec'), {'__name__': '__main__'})\n"
)


@dataclass(frozen=True)
class RunLimits:
    """What one run may use. Memory is the guest's address space (bwrap: RLIMIT_AS of
    every process; wasi: the WebAssembly memory)."""

    timeout_s: float = 30.0
    memory_mb: int = 256
    max_output_chars: int = 4000
    max_file_mb: int = 10
    max_processes: int = 32


@dataclass(frozen=True)
class RunResult:
    """A finished run: its output (already cut to the limit), its exit status, and which
    limit stopped it, if one did ("timeout", "memory")."""

    stdout: str
    stderr: str
    exit_code: int | None
    stopped: str | None = None


class Engine(Protocol):
    """One way to run code: `name` for logs and docs, `run` in a child process."""

    name: str

    async def run(self, code: str, folder: Path, limits: RunLimits) -> RunResult: ...
