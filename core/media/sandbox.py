"""Parsing hostile bytes in a child process with CPU-time and memory limits.

Why: a small crafted PDF can keep pypdf busy for minutes, a DOCX or a page can take
gigabytes, and a parse in a thread cannot be stopped. Each parse here is a fresh
`python -m core.media.parse_worker` that limits itself (RLIMIT_CPU, RLIMIT_AS, no file
writes) before it reads its input, is killed at the timeout or when the turn that waits
for it is cancelled, and dies with the daemon. A fresh process per parse costs its
imports but means one person's hostile file never shares a process with the next
person's document. The child gets the bytes, the limits and sys.path — no environment,
so no tokens or keys.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

_REPLY_SLACK = 64 * 1024  # the JSON around the text


class ParseFailed(Exception):
    """The parse was refused or stopped; str(exc) is a short reason fit for the user."""


@dataclass(frozen=True)
class ParseLimits:
    """What one parse may use. The memory limit is address space (RLIMIT_AS), the child's
    whole footprint including Python and the parser libraries."""

    cpu_s: int = 20
    memory_mb: int = 768
    timeout_s: float = 30.0  # wall clock, the child is killed after it
    max_running: int = 2  # parses at once; more wait their turn


class ParseSandbox:
    """Runs parse jobs in limited child processes, at most `max_running` at once."""

    def __init__(self, limits: ParseLimits | None = None) -> None:
        self.limits = limits or ParseLimits()
        self._slots = asyncio.Semaphore(self.limits.max_running)
        self._running: set[asyncio.subprocess.Process] = set()
        self._closed = False

    async def run(
        self,
        job: str,
        args: dict[str, Any],
        data: bytes,
        *,
        max_reply: int,
        timeout_s: float | None = None,
        cpu_s: int | None = None,
        memory_mb: int | None = None,
    ) -> dict[str, Any]:
        """The job's result; ParseFailed when it was refused, too slow, too large or the
        child died. `max_reply`: the most bytes of answer read back from the child.
        `cpu_s`, `memory_mb`: tighter limits for this job (never looser than the sandbox's)."""
        cpu = min(cpu_s or self.limits.cpu_s, self.limits.cpu_s)
        memory = min(memory_mb or self.limits.memory_mb, self.limits.memory_mb)
        async with self._slots:
            if self._closed:
                raise ParseFailed("the daemon is stopping")
            try:
                proc = await self._start(cpu, memory)
            except OSError as exc:  # out of processes or memory: a note, not a failed turn
                log.warning("parse child not started: %s", type(exc).__name__)
                raise ParseFailed("the reader could not be started") from None
            self._running.add(proc)
            try:
                wait = timeout_s if timeout_s is not None else self.limits.timeout_s
                raw = await asyncio.wait_for(self._exchange(proc, job, args, data, max_reply), wait)
            except TimeoutError:
                raise ParseFailed("it took too long to read") from None
            except OSError:
                raise ParseFailed("the reader failed on it") from None
            finally:
                self._running.discard(proc)
                await _end(proc)
        return _result(proc.returncode, raw, max_reply)

    @property
    def running(self) -> int:
        """Parse processes alive now."""
        return len(self._running)

    async def close(self) -> None:
        """Kill the parses still running (daemon stop); later runs are refused."""
        self._closed = True
        for proc in list(self._running):
            await _end(proc)

    async def _start(self, cpu_s: int, memory_mb: int) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-B",
            "-s",
            "-m",
            "core.media.parse_worker",
            str(cpu_s),
            str(memory_mb),
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=_child_env(),
            start_new_session=True,  # a terminal's Ctrl-C goes to the daemon, which decides
        )

    @staticmethod
    async def _exchange(
        proc: asyncio.subprocess.Process, job: str, args: dict[str, Any], data: bytes, cap: int
    ) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        header = json.dumps({"job": job, "args": args}).encode() + b"\n"
        try:
            proc.stdin.write(header)
            proc.stdin.write(data)
            await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the child died early (a limit): its exit status says why
        raw = bytearray()
        while len(raw) <= cap:  # a child that writes without end is cut, not buffered
            chunk = await proc.stdout.read(64 * 1024)
            if not chunk:
                await proc.wait()
                break
            raw += chunk
        return bytes(raw)


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Kill (if still running) and reap. Killed first, so a cancellation while waiting
    leaves nothing running; the shielded wait still reaps it."""
    if proc.returncode is None:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    await asyncio.shield(proc.wait())


def _result(code: int | None, raw: bytes, cap: int) -> dict[str, Any]:
    """The child's answer, checked: its exit status, its size, its shape."""
    if len(raw) > cap:  # checked first: the child was killed for it
        raise ParseFailed("its text is larger than allowed")
    if code in (-signal.SIGXCPU, -signal.SIGKILL):  # RLIMIT_CPU's soft, then hard signal
        raise ParseFailed("it took too long to read")
    try:
        reply = json.loads(raw) if raw else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        log.info("parse child ended with %s and no answer", code)
        raise ParseFailed("the reader failed on it")
    if "refused" in reply:
        raise ParseFailed(str(reply["refused"])[:300])
    result = reply.get("result")
    if not isinstance(result, dict):
        raise ParseFailed("the reader failed on it")
    return result


def _child_env() -> dict[str, str]:
    """Only what Python needs to find our code: no tokens, keys or proxies."""
    paths = [p for p in sys.path if p and os.path.isabs(p)]
    return {"PYTHONPATH": os.pathsep.join(paths), "LC_ALL": "C.UTF-8", "PATH": os.defpath}
