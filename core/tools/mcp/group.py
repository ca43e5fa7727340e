"""`python -m core.tools.mcp.group <command> [args...]`: a stdio MCP server whose whole
process group ends with it.

Why: the SDK kills a stdio server's process group only when the server outlives its
grace period, so a server that exits on stdin EOF (as the spec asks) or crashes leaves
its children running. This launcher leads the group, runs the server in it with the
same stdin and stdout, and when the server exits for any reason signals the group:
SIGTERM, then SIGKILL after `GRACE_S`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

GRACE_S = 2.0
_POLL_S = 0.02


def members(group: int, *, proc: Path = Path("/proc")) -> list[int] | None:
    """Live processes in `group` other than this one (zombies excluded); None where
    /proc cannot tell (not Linux)."""
    if not (proc / "self" / "stat").exists():
        return None
    me, found = os.getpid(), []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(entry.name))
    return found


def end_group(group: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM every member of `group` but us, then SIGKILL what is left after `grace_s`."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's signal reaches us too
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    left = members(group)
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        left = members(group)
    if left is None:  # no /proc: wait the grace out, then the whole group, us included
        time.sleep(grace_s)
        os.killpg(group, signal.SIGKILL)
    for pid in left or ():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m core.tools.mcp.group <command> [args...]", file=sys.stderr)
        return 2
    try:
        server = subprocess.Popen(argv)  # noqa: S603 - the operator's configured command
    except OSError as exc:
        print(f"cannot start MCP server {argv[0]!r}: {exc}", file=sys.stderr)
        return 127

    def forward(signum: int, frame: FrameType | None) -> None:
        server.send_signal(signum)  # someone stopped us alone: stop the server first

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    # The server holds the pipes now; ours must not keep the daemon's reader open.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    code = server.wait()
    group = os.getpgrp()
    if group == os.getpid():  # we lead the group (started in a new session): end it
        end_group(group)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
