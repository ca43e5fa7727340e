"""Workspace: bootstrap files, memory notes, the stat cache, ensure_workspace."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

from core.workspace.files import BOOTSTRAP_FILES, FileCache, Workspace, ensure_workspace


def _touch_later(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime forward, so the change is visible on any fs."""
    st = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_ensure_workspace_creates_starters_once(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    created = ensure_workspace(root, "Mochi")
    names = {p.relative_to(root).as_posix() for p in created}
    assert names == set(BOOTSTRAP_FILES) | {"memory/MEMORY.md"}
    assert (root / "skills").is_dir() and (root / "memory").is_dir()
    assert "Mochi" in (root / "IDENTITY.md").read_text(encoding="utf-8")
    for path in created:
        text = path.read_text(encoding="utf-8")
        assert text.strip() and len(text) < 1000  # short starters, no placeholders left
        assert "{bot}" not in text
    ws = Workspace(root)
    sent = "".join(f.content for f in ws.bootstrap_files())
    assert "<!--" not in sent and "Mochi" in sent  # operator notes never reach the model
    assert [f.name for f in ws.bootstrap_files()] == [
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
    ]
    assert ws.memory_notes(date(2025, 1, 1)) == []  # the starter memory is only a comment


def test_ensure_workspace_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("my own soul", encoding="utf-8")
    created = ensure_workspace(tmp_path, "Mochi")
    assert tmp_path / "SOUL.md" not in created
    assert (tmp_path / "SOUL.md").read_text(encoding="utf-8") == "my own soul"
    assert ensure_workspace(tmp_path, "Other") == []


def test_bootstrap_files_in_order_absent_and_blank_skipped(tmp_path: Path) -> None:
    (tmp_path / "TOOLS.md").write_text("tools", encoding="utf-8")
    (tmp_path / "AGENTS.md").write_text("agents", encoding="utf-8")
    (tmp_path / "USER.md").write_text("  \n", encoding="utf-8")
    ws = Workspace(tmp_path)
    assert [f.name for f in ws.bootstrap_files()] == ["AGENTS.md", "TOOLS.md"]


def test_html_comments_are_stripped(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("a<!-- note\nfor me -->b\n<!-- x -->\nc", encoding="utf-8")
    assert Workspace(tmp_path).bootstrap_files()[0].content == "ab\nc"


def test_memory_notes_today_only(tmp_path: Path) -> None:
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "MEMORY.md").write_text("long lived", encoding="utf-8")
    (mem / "2025-03-01.md").write_text("march first", encoding="utf-8")
    (mem / "2025-03-02.md").write_text("march second", encoding="utf-8")
    ws = Workspace(tmp_path)
    notes = ws.memory_notes(date(2025, 3, 2))
    assert [n.name for n in notes] == ["memory/MEMORY.md", "memory/2025-03-02.md"]
    assert "march first" not in "".join(n.content for n in notes)
    assert [n.name for n in ws.memory_notes(date(2025, 4, 1))] == ["memory/MEMORY.md"]


def test_files_reread_only_when_changed(tmp_path: Path) -> None:
    path = tmp_path / "SOUL.md"
    path.write_text("v1", encoding="utf-8")
    ws = Workspace(tmp_path)
    for _ in range(5):
        assert ws.bootstrap_files()[0].content == "v1"
    assert ws.disk_reads == 1
    _touch_later(path, "v2")
    assert ws.bootstrap_files()[0].content == "v2"
    assert ws.disk_reads == 2
    path.unlink()
    assert ws.bootstrap_files() == []


def test_oversized_and_undecodable_files_are_cut_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    path.write_bytes(b"\xff\xfeok " + b"a" * 5000)
    entry = FileCache(max_bytes=100).read(path)
    assert entry is not None
    assert entry.content.endswith("(file cut: too large)")
    assert len(entry.content) < 200
    assert "\ufffd" in entry.content  # bad bytes replaced, not an exception


def test_directory_named_like_a_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    assert Workspace(tmp_path).bootstrap_files() == []
