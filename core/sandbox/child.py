"""Starting one run's child process: a clean environment, its own session, dead with
the daemon, stopped at its deadline, its output read up to a bound.

Why here and not in each engine: both engines need the same promises (no variable of
the daemon reaches a run; a run that hangs or floods its output costs the daemon
nothing but a bounded buffer; the whole process group goes when the run ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import resource
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
# What is kept of a stream beyond the chars the model reads: enough to cut at a line.
_READ_SLACK = 4096


@dataclass(frozen=True)
class ChildLimits:
    """Kernel limits set in the child before it runs anything (None: not set)."""

    address_space: int | None = None
    cpu_s: int | None = None
    file_size: int | None = None
    processes: int | None = None
    uid: int | None = None  # drop to this user first (a daemon running as root)


@dataclass(frozen=True)
class ChildOutput:
    stdout: bytes
    stderr: bytes
    returncode: int | None
    timed_out: bool


def _prepare(limits: ChildLimits) -> Callable[[], None]:
    def prepare() -> None:
        # Dies with the daemon: a run never outlives the process that started it.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if limits.uid is not None:
            os.setgroups([])
            os.setgid(limits.uid)
            os.setuid(limits.uid)
            # A process that changed its user is not dumpable: its /proc/self/fd would be
            # root's, and bwrap binds the chat's folder through it.
            libc.prctl(PR_SET_DUMPABLE, 1)
        pairs = (
            (resource.RLIMIT_AS, limits.address_space),
            (resource.RLIMIT_CPU, limits.cpu_s),
            (resource.RLIMIT_FSIZE, limits.file_size),
            (resource.RLIMIT_NPROC, limits.processes),
            (resource.RLIMIT_CORE, 0),
        )
        for kind, value in pairs:
            if value is not None:
                resource.setrlimit(kind, (value, value))

    return prepare


async def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    timeout_s: float,
    max_bytes: int,
    limits: ChildLimits | None = None,
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
) -> ChildOutput:
    """Run `argv` with exactly `env`, kill its process group at `timeout_s` (or when the
    caller is cancelled), and keep at most `max_bytes` of each stream."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
        preexec_fn=_prepare(limits or ChildLimits()),
    )
    assert process.stdout is not None and process.stderr is not None
    reads = asyncio.gather(
        _bounded(process.stdout, max_bytes + _READ_SLACK),
        _bounded(process.stderr, max_bytes + _READ_SLACK),
        process.wait(),
    )
    timed_out = False
    try:
        out, err, code = await asyncio.wait_for(asyncio.shield(reads), timeout_s)
    except TimeoutError:
        timed_out = True
        _kill(process)
        out, err, code = await reads
    except BaseException:
        _kill(process)
        with contextlib.suppress(BaseException):
            await reads
        raise
    return ChildOutput(out, err, code, timed_out)


async def _bounded(stream: asyncio.StreamReader, limit: int) -> bytes:
    """The first `limit` bytes; the rest is read and dropped so the child never blocks."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
    return bytes(kept)


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
