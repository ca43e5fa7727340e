"""The bot's workspace on disk: bootstrap files, workspace memory notes, skills folder.

Why a class with a stat cache: the system prompt is rebuilt every turn, but the files it
is made of change rarely. Each file is re-read only when its mtime (or size, or inode)
changes, so a turn costs a handful of `stat` calls instead of reading the disk.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from datetime import date
from pathlib import Path

log = logging.getLogger(__name__)

# Read in this order; each one that exists becomes part of the persona.
BOOTSTRAP_FILES: tuple[str, ...] = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md")
MEMORY_DIR = "memory"
MEMORY_FILE = "MEMORY.md"
SKILLS_DIR = "skills"
CHATS_DIR = "chats"
# A chat's own folder (chats/<platform>:<chat_id>/) may replace these for that chat only.
CHAT_PERSONA_FILES: tuple[str, ...] = ("AGENTS.md", "SOUL.md")
_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)
# A bootstrap file is prompt text: anything bigger than this is a mistake, not a persona.
DEFAULT_MAX_FILE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class WorkspaceFile:
    """One text file as last read: its name relative to the workspace and its text."""

    name: str
    path: Path
    content: str
    stamp: tuple[int, int, int]  # (mtime_ns, size, inode): changes when the file does


class FileCache:
    """Reads small text files, re-reading one only when its stat stamp changes.

    Absent files read as None; unreadable ones too, with a warning (a broken file must
    not stop the bot from answering). Oversized files are cut at `max_bytes` with a note.
    With `strip_comments`, `<!-- ... -->` notes for the operator are removed.
    """

    def __init__(
        self, max_bytes: int = DEFAULT_MAX_FILE_BYTES, *, strip_comments: bool = False
    ) -> None:
        self.max_bytes = max_bytes
        self.strip_comments = strip_comments
        self._files: dict[Path, WorkspaceFile] = {}
        self.reads = 0  # how many times the disk was actually read (tests, benchmarks)

    def read(self, path: Path, name: str | None = None) -> WorkspaceFile | None:
        try:
            st = path.stat()
        except FileNotFoundError:
            self._files.pop(path, None)
            return None
        except OSError as exc:
            log.warning("cannot stat %s: %s", path, exc)
            self._files.pop(path, None)
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._files.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached
        try:
            with path.open("rb") as handle:
                raw = handle.read(self.max_bytes + 1)
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
            self._files.pop(path, None)
            return None
        self.reads += 1
        text = raw[: self.max_bytes].decode("utf-8", errors="replace").replace("\r\n", "\n")
        if len(raw) > self.max_bytes:
            log.warning("%s is larger than %d bytes; only its start is used", path, self.max_bytes)
            text = text.rstrip("\ufffd") + "\n…(file cut: too large)"
        if self.strip_comments:
            text = _COMMENT.sub("", text)
        entry = WorkspaceFile(name=name or path.name, path=path, content=text, stamp=stamp)
        self._files[path] = entry
        return entry

    def forget_missing(self, keep: set[Path]) -> None:
        """Drop cached entries not in `keep` (files that disappeared), so memory stays bounded."""
        for path in [p for p in self._files if p not in keep]:
            del self._files[path]


class Workspace:
    """Read access to one workspace directory; see README "Workspace layout"."""

    def __init__(
        self, root: str | os.PathLike[str], *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.memory_dir = self.root / MEMORY_DIR
        self.skills_dir = self.root / SKILLS_DIR
        self._cache = FileCache(max_file_bytes, strip_comments=True)

    @property
    def disk_reads(self) -> int:
        return self._cache.reads

    def describe(self) -> str:
        """Where things live, for the model's identity section."""
        mem, skills = self.memory_dir, self.skills_dir
        return (
            f"Workspace: {self.root}\n"
            f"- workspace memory: {mem / MEMORY_FILE} and daily notes {mem}/YYYY-MM-DD.md\n"
            f"- skills: {skills}/<name>/SKILL.md"
        )

    def bootstrap_files(self, chat: tuple[str, str] | None = None) -> list[WorkspaceFile]:
        """The bootstrap files that exist and are not blank, in BOOTSTRAP_FILES order.

        With `chat` (platform, chat id), that chat's own AGENTS.md / SOUL.md in
        chats/<platform>:<chat_id>/ replace the workspace's (a persona per group).
        """
        own = self.chat_files(chat)
        found = []
        for name in BOOTSTRAP_FILES:
            entry = own.get(name) or self._cache.read(self.root / name, name)
            if entry is not None and entry.content.strip():
                found.append(entry)
        return found

    def chat_dir(self, chat: tuple[str, str]) -> Path | None:
        """chats/<platform>:<chat_id>/, or None for ids that could leave the folder."""
        platform, chat_id = chat
        name = f"{platform}:{chat_id}"
        if not platform or not chat_id or "/" in name or "\\" in name or name.startswith("."):
            return None
        return self.root / CHATS_DIR / name

    def chat_files(self, chat: tuple[str, str] | None) -> dict[str, WorkspaceFile]:
        """This chat's own persona files that exist and are not blank, by name."""
        folder = self.chat_dir(chat) if chat else None
        if folder is None:
            return {}
        found = {}
        for name in CHAT_PERSONA_FILES:
            entry = self._cache.read(folder / name, f"{CHATS_DIR}/{folder.name}/{name}")
            if entry is not None and entry.content.strip():
                found[name] = entry
        return found

    def memory_notes(self, today: date) -> list[WorkspaceFile]:
        """memory/MEMORY.md and today's memory/YYYY-MM-DD.md, those that exist.

        These are the operator's notes for the bot as a whole, not any user's memory:
        per-user memory comes from storage and is added by the caller per turn.
        """
        found = []
        daily = f"{today.isoformat()}.md"
        for name in (MEMORY_FILE, daily):
            entry = self._cache.read(self.memory_dir / name, f"{MEMORY_DIR}/{name}")
            if entry is not None and entry.content.strip():
                found.append(entry)
        return found


# --- creating a workspace -------------------------------------------------------------

# HTML comments in these files are notes for the operator: they never reach the model.
_STARTERS: dict[str, str] = {
    "AGENTS.md": """\
<!-- How {bot} behaves. Every file here is sent to the model on every turn: keep it short. -->
- Answer the person who wrote the current message. In groups several people talk; each
  message starts with its sender's `[name]: `.
- Be brief in chats: a few sentences unless asked for more.
- For fresh facts (news, prices, schedules), use the search tool as the tool guide
  explains, then answer from what you found and say where it came from.
- Never reveal one person's remembered facts to anyone else.
- When a reaction says it all (thanks, agreement), answer with one emoji alone: it is
  shown as a reaction on the message where the chat allows it.
""",
    "SOUL.md": """\
<!-- {bot}'s character and tone. -->
Friendly, direct and honest. Say "I don't know" rather than guess. Reply in the language
the person wrote in.
""",
    "USER.md": """\
<!-- What {bot} should know about its users in general: audience, tone, topics to avoid.
Facts about one person are remembered per user (`/memory`), not here. -->
""",
    "TOOLS.md": """\
<!-- Notes on using tools. Their exact syntax is in the tool guide sent each turn. -->
Use a tool only when it helps the answer, and never invent tool results.
""",
    "IDENTITY.md": """\
Name: {bot}
Role: a chat assistant in Telegram and QQ chats.
""",
    f"{MEMORY_DIR}/{MEMORY_FILE}": """\
<!-- Long-lived notes {bot} always sees, shared by all chats (write below this line).
Notes for one day go in memory/YYYY-MM-DD.md and are shown only on that day. -->
""",
}


def ensure_workspace(path: str | os.PathLike[str], bot_name: str) -> list[Path]:
    """Create the workspace with starter files where missing; returns the files created.

    Existing files are never touched: the workspace belongs to the operator once made.
    """
    root = Path(path).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    (root / MEMORY_DIR).mkdir(exist_ok=True)
    (root / SKILLS_DIR).mkdir(exist_ok=True)
    created = []
    for name, template in _STARTERS.items():
        target = root / name
        if target.exists():
            continue
        try:
            with target.open("x", encoding="utf-8") as handle:
                handle.write(template.format(bot=bot_name))
        except FileExistsError:  # created concurrently by another process: keep theirs
            continue
        created.append(target)
    if created:
        log.info("workspace %s: created %s", root, ", ".join(p.name for p in created))
    return created
