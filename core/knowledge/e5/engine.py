"""The daemon's side of the passage encoder: one worker process (`worker.py`), started on
the first call and kept while the embedder is open; a worker that died is started again
on the next call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.knowledge.e5.weights import PortError, bundled_weights

# Every BLAS a numpy build may carry, held to one thread in the worker only.
_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def child_env() -> dict[str, str]:
    """Only what Python needs to find our code (no tokens, keys or proxies), and BLAS on
    one thread."""
    paths = [p for p in sys.path if p and os.path.isabs(p)]
    env = {"PYTHONPATH": os.pathsep.join(paths), "LC_ALL": "C.UTF-8", "PATH": os.defpath}
    env.update(dict.fromkeys(_ONE_THREAD, "1"))
    return env


class PassageEngine:
    """`passages(texts)` -> (n, dim) float32 unit rows, computed in the worker process.
    Raises PortError with the worker's one line when it cannot load or answer."""

    def __init__(self, path: Path | None = None, *, workers: int | None = None) -> None:
        self._path = path or bundled_weights()
        self._workers = max(1, min(workers or os.cpu_count() or 1, 8))
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts, "passage: ")

    def embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        request = json.dumps({"texts": list(texts), "prefix": prefix}).encode() + b"\n"
        with self._lock:
            proc = self._running()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                answer = self._answer(proc)
                if "error" not in answer:
                    count, dim = int(answer["rows"]), int(answer["dim"])
                    data = proc.stdout.read(count * dim * 4)
                    if len(data) != count * dim * 4:
                        raise EOFError
            except (OSError, EOFError, ValueError, KeyError) as exc:
                self._end(proc)
                reason = f"{type(exc).__name__}, exit {proc.returncode}"
                raise PortError(f"the e5 worker process failed ({reason})") from None
        if "error" in answer:
            raise PortError(str(answer["error"]))
        return np.frombuffer(data, "<f4").reshape(count, dim).copy()

    def close(self) -> None:
        """End the worker: stdin closed, so an idle worker exits at once; a busy one is
        killed."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._stop(proc)

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        proc = subprocess.Popen(
            [sys.executable, "-B", "-s", "-m", "core.knowledge.e5.worker"]
            + [str(self._path), str(self._workers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=child_env(),
            start_new_session=True,  # a terminal's Ctrl-C goes to the daemon, which decides
        )
        try:
            ready = self._answer(proc)
        except (OSError, EOFError, ValueError) as exc:
            self._stop(proc)
            reason = f"{type(exc).__name__}, exit {proc.returncode}"
            raise PortError(f"the e5 worker process did not start ({reason})") from None
        if "ready" not in ready:
            self._stop(proc)
            raise PortError(str(ready.get("error", "the e5 worker process did not start")))
        self._proc = proc
        return proc

    @staticmethod
    def _answer(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise EOFError
        answer = json.loads(line)
        if not isinstance(answer, dict):
            raise ValueError("not an object")
        return answer

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        if self._proc is proc:
            self._proc = None
        self._stop(proc)

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
