"""A folder per chat: what its runs see at /work, with `in/` (documents people shared in
the chat) and `out/` (files a run wants sent), kept `keep_hours` after its last use.

Why every touch goes through a folder descriptor opened without following links: a run
owns its folder and may replace `in/` or `out/`, or a file in them, with a symbolic link
to anything on the host; the daemon then reading out/ or writing in/ by path would read
or write there with the daemon's rights. Opening each step with O_NOFOLLOW relative to
the step before keeps every read and write inside the chat's folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

IN, OUT, SENT = "in", "out", "sent"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_UNSAFE = re.compile(r"[^A-Za-z0-9._\- ]+")
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class OutFile:
    name: str
    data: bytes


@dataclass(frozen=True)
class Collected:
    files: list[OutFile]
    refused: list[str]  # "name (why)"


def safe_name(name: str) -> str:
    """A file name with no path in it and nothing a shell or a chat would trip on."""
    base = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return (base or "file")[:MAX_NAME_CHARS]


class ChatFolders:
    """The chats' folders under `root`; `owner` is the user runs are dropped to (a root
    daemon's bwrap runs), who must be able to write a folder and its out/."""

    def __init__(self, root: Path, keep_hours: float, owner: int | None = None) -> None:
        self.root = root
        self._keep_s = keep_hours * 3600
        self._owner = owner

    def path(self, platform: str, chat_id: str) -> Path:
        """The chat's folder: named by a hash, so no chat id can name a path."""
        digest = hashlib.sha256(f"{platform}\0{chat_id}".encode()).hexdigest()[:32]
        return self.root / digest

    def prepare(self, platform: str, chat_id: str) -> Path:
        """The chat's folder with its in/ and out/, made if missing, marked as used now."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
        folder = self.path(platform, chat_id)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        fd = os.open(folder, _DIR_FLAGS)
        try:
            for sub, writable in ((IN, False), (OUT, True), (SENT, False)):
                _ensure_dir(fd, sub)
                if writable and self._owner is not None:
                    os.chown(sub, self._owner, self._owner, dir_fd=fd, follow_symlinks=False)
            if self._owner is not None:
                os.fchown(fd, self._owner, self._owner)
            os.utime(fd)
        finally:
            os.close(fd)
        return folder

    def save_shared(self, platform: str, chat_id: str, name: str, data: bytes) -> str:
        """A document shared in the chat, under in/; the name it got there."""
        folder = self.prepare(platform, chat_id)
        name = safe_name(name)
        with _open_dir(folder) as top, _open_dir_at(top, IN) as inbox:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=inbox)  # a run's link or an older copy
            fd = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=inbox
            )
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        return name

    def collect(self, folder: Path, max_files: int, max_bytes: int) -> Collected:
        """The regular files in out/ (not links, not folders), each moved to sent/ as it
        is taken so it is sent once; past `max_files` or `max_bytes` a file is named as
        refused and moved too."""
        files: list[OutFile] = []
        refused: list[str] = []
        with (
            _open_dir(folder) as top,
            _open_dir_at(top, OUT) as out,
            _open_dir_at(top, SENT) as sent,
        ):
            for name in sorted(os.listdir(out)):
                why = self._take(out, name, max_bytes, files, len(files) >= max_files)
                if why is not None:
                    refused.append(f"{name} ({why})")
                with contextlib.suppress(OSError):
                    os.replace(name, name, src_dir_fd=out, dst_dir_fd=sent)
        return Collected(files, refused)

    @staticmethod
    def _take(out: int, name: str, max_bytes: int, files: list[OutFile], full: bool) -> str | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=out)
        except OSError:
            return "not a regular file"
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                return "not a regular file"
            if full:
                return "too many files"
            if info.st_size > max_bytes:
                return f"larger than {max_bytes // (1024 * 1024)} MB"
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            return f"larger than {max_bytes // (1024 * 1024)} MB"
        files.append(OutFile(safe_name(name), data))
        return None

    def prune(self, now: float | None = None) -> int:
        """Remove the folders of chats with no run for `keep_hours`; how many went."""
        if not self.root.is_dir():
            return 0
        cutoff = (time.time() if now is None else now) - self._keep_s
        gone = 0
        for entry in os.scandir(self.root):
            if (
                entry.is_dir(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_mtime < cutoff
            ):
                shutil.rmtree(entry.path, ignore_errors=True)
                gone += 1
        return gone


def _ensure_dir(parent: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        os.mkdir(name, 0o755, dir_fd=parent)
        return
    if not stat.S_ISDIR(info.st_mode):  # a run put a link or a file there
        os.unlink(name, dir_fd=parent)
        os.mkdir(name, 0o755, dir_fd=parent)


@contextlib.contextmanager
def _open_dir(path: Path) -> Iterator[int]:
    fd = os.open(path, _DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _open_dir_at(parent: int, name: str) -> Iterator[int]:
    _ensure_dir(parent, name)
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        yield fd
    finally:
        os.close(fd)
