"""Skills: `skills/<name>/SKILL.md` files with YAML frontmatter, found and summarised.

Why a summary instead of the full text: a workspace may hold dozens of skills, and most
turns need none. The model sees each skill's name, description and path, and reads the
file when it needs it; only skills marked `always: true` (or asked for by name) are put
into the prompt in full. A skill file must never break a build: a frontmatter that is
not valid YAML is read line by line instead, with a warning.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import yaml

from core.workspace.files import FileCache

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_TRUE = {"true", "yes", "on", "1"}
_NULL = {"null", "~"}  # YAML's spellings of "no value", for the fallback reader


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill as parsed; `available` is False when a required bin or env var is missing."""

    name: str
    description: str
    path: Path
    body: str
    always: bool = False
    bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()  # e.g. ("bin:ffmpeg", "env:WEATHER_KEY")
    warnings: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        return not self.missing


@dataclass(frozen=True, slots=True)
class Frontmatter:
    meta: dict[str, Any]
    body: str
    warnings: tuple[str, ...] = field(default=())


def parse_frontmatter(text: str) -> Frontmatter:
    """Split `---` YAML frontmatter from the body; never raises.

    Invalid YAML (typically an unquoted `description: a: b`) falls back to plain
    `key: value` lines split at the first colon, plus simple nested keys and `- item`
    lists, and says so in `warnings`.
    """
    match = _FRONTMATTER.match(text)
    if match is None:
        return Frontmatter({}, text)
    raw, body = match.group(1), text[match.end() :]
    try:
        loaded = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        return Frontmatter(
            _fallback_parse(raw),
            body,
            (f"frontmatter is not valid YAML{where}; read as plain 'key: value' lines",),
        )
    if loaded is None:
        return Frontmatter({}, body)
    if not isinstance(loaded, dict):
        warning = "frontmatter is not a mapping; read as 'key: value' lines"
        return Frontmatter(_fallback_parse(raw), body, (warning,))
    return Frontmatter({str(k): v for k, v in loaded.items()}, body)


def _fallback_parse(raw: str) -> dict[str, Any]:
    """Tolerant reader for the YAML people actually write: `key: value` at the first colon."""
    meta: dict[str, Any] = {}
    parent: str | None = None
    child: str | None = None
    for line in raw.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indented = line[:1] in (" ", "\t")
        stripped = line.strip()
        if stripped.startswith("- ") and parent is not None:
            item = _scalar(stripped[2:])
            target = meta[parent]
            if child is not None and isinstance(target, dict):
                target.setdefault(child, [])
                if isinstance(target[child], list):
                    target[child].append(item)
            elif isinstance(target, list) or target == {}:
                meta[parent] = (target if isinstance(target, list) else []) + [item]
            continue
        key, sep, value = stripped.partition(":")
        if not sep or (indented and parent is not None and isinstance(meta[parent], str)):
            if indented and parent is not None and isinstance(meta[parent], str):
                meta[parent] = f"{meta[parent]} {stripped}".strip()  # a folded continuation
            continue
        key, value = key.strip(), value.strip()
        if not indented:
            parent, child = key, None
            meta[key] = _scalar(value) if value else {}
        elif parent is not None and isinstance(meta[parent], dict):
            meta[parent][key] = _scalar(value) if value else []
            child = key if not value else None
    return meta


def _scalar(value: str) -> Any:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value.startswith("[") and value.endswith("]"):
        return [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value.lower() in _NULL:
        return None
    return value


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE


def _as_names(value: Any) -> tuple[str, ...]:
    """A requirement list as written by hand: a list, a "a, b" string, or nothing at all.

    Null and empty entries (`bins: null`, `bins: [null, ""]`, `env: [~]`, a bare `-`)
    name nothing, so they require nothing; nanobot reads them the same way.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, Iterable):
        value = (value,)
    names = (str(v).strip() for v in value if v is not None)
    return tuple(name for name in names if name)


def _requires(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """`requires:` at the top level, or nanobot-style `metadata: {nanobot: {requires}}`."""
    found = meta.get("requires")
    if isinstance(found, Mapping):
        return found
    extra = meta.get("metadata")
    if isinstance(extra, Mapping):
        for value in extra.values():
            if isinstance(value, Mapping) and isinstance(value.get("requires"), Mapping):
                return value["requires"]
    return {}


class SkillsLoader:
    """Finds skills under one directory; each SKILL.md is re-parsed only when it changes.

    `which` and `environ` are injectable so availability can be tested without touching
    the real PATH or environment. Availability is checked when a skill file is (re)read.
    """

    def __init__(
        self,
        skills_dir: str | os.PathLike[str],
        *,
        which: Callable[[str], str | None] = shutil.which,
        environ: Mapping[str, str] | None = None,
        max_file_bytes: int = 256 * 1024,
    ) -> None:
        self.skills_dir = Path(skills_dir)
        self._which = which
        self._environ = os.environ if environ is None else environ
        self._files = FileCache(max_file_bytes)
        self._parsed: dict[Path, tuple[tuple[int, int, int], Skill]] = {}

    def list_skills(self) -> list[Skill]:
        """Every skill found, sorted by name. A missing skills directory means no skills."""
        try:
            entries = sorted(p for p in self.skills_dir.iterdir() if p.is_dir())
        except OSError:
            self._parsed.clear()
            return []
        skills, seen = [], set()
        for folder in entries:
            path = folder / SKILL_FILE
            skill = self._load(path, folder.name)
            if skill is not None:
                skills.append(skill)
                seen.add(path)
        for stale in [p for p in self._parsed if p not in seen]:
            del self._parsed[stale]
        self._files.forget_missing(seen)
        return sorted(skills, key=lambda s: s.name)

    def _load(self, path: Path, folder_name: str) -> Skill | None:
        entry = self._files.read(path)
        if entry is None:
            return None
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == entry.stamp:
            return cached[1]
        skill = self._parse(path, folder_name, entry.content)
        for warning in skill.warnings:
            log.warning("skill %s (%s): %s", skill.name, path, warning)
        self._parsed[path] = (entry.stamp, skill)
        return skill

    def _parse(self, path: Path, folder_name: str, text: str) -> Skill:
        front = parse_frontmatter(text)
        meta = front.meta
        name = " ".join(str(meta.get("name") or folder_name).split()) or folder_name
        description = " ".join(str(meta.get("description") or "").split())
        warnings = list(front.warnings)
        if not description:
            description = _first_line(front.body) or name
            warnings.append("no description in frontmatter; using the first line of the file")
        extra = meta.get("metadata")
        always_value = meta.get("always")
        if always_value is None and isinstance(extra, Mapping):
            nested = [v for v in extra.values() if isinstance(v, Mapping) and "always" in v]
            always_value = nested[0]["always"] if nested else None
        requires = _requires(meta)
        bins, env = _as_names(requires.get("bins")), _as_names(requires.get("env"))
        missing = tuple(f"bin:{b}" for b in bins if self._which(b) is None) + tuple(
            f"env:{e}" for e in env if not self._environ.get(e)
        )
        return Skill(
            name=name,
            description=description,
            path=path,
            body=front.body.strip(),
            always=_as_bool(always_value) if always_value is not None else False,
            bins=bins,
            env=env,
            missing=missing,
            warnings=tuple(warnings),
        )


def _first_line(body: str) -> str:
    for line in body.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:200]
    return ""


def skills_summary_xml(skills: Iterable[Skill]) -> str:
    """The XML list the model reads to decide which SKILL.md to open; '' when no skills."""
    rows = []
    for skill in skills:
        rows.append(
            f'  <skill available="{"true" if skill.available else "false"}">\n'
            f"    <name>{escape(skill.name)}</name>\n"
            f"    <description>{escape(skill.description)}</description>\n"
            f"    <location>{escape(str(skill.path))}</location>\n"
            + (
                f"    <requires>{escape(', '.join(skill.missing))}</requires>\n"
                if skill.missing
                else ""
            )
            + "  </skill>"
        )
    if not rows:
        return ""
    return (
        "These skills extend what you can do. To use one, read its SKILL.md at the given "
        'location first. Skills with available="false" need the missing programs or '
        "settings listed in <requires> installed before they work.\n"
        "<skills>\n" + "\n".join(rows) + "\n</skills>"
    )


def skill_full_text(skill: Skill) -> str:
    """A skill put into the prompt in full (always-on or requested by name)."""
    return skill.body or skill.description
