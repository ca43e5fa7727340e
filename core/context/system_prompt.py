"""The context engine's system prompt: which components a turn gets, assembled in a room.

Choosing the components in the documented order and keeping one persistent
ContextAssembler in step with them, so unchanged components keep their counts.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from core.clock import WallClock
from core.context.assembler import ComponentPriority, ContextAssembler, ContextOverflowError, Order
from core.context.parts import (
    CHAT_PERSONA,
    IDENTITY,
    SESSION,
    SKILLS_SUMMARY,
    TIME,
    TOOL_GUIDE,
    SystemComponent,
    time_text,
)
from core.text.tokens import TokenCounter
from core.workspace.files import Workspace
from core.workspace.skills import SkillsLoader, skill_full_text, skills_summary_xml

log = logging.getLogger(__name__)

# Where a build puts its parts. "cache": the daemon's request and the engine's default,
# stable first and this turn's own material (time, session, sender memory) after the
# history (docs/context-engine.md, "Why this order"). "seed": seed 000's one system prompt
# (identity with the time, bootstrap files, memory notes, skills; the session last), the
# default of the seed-shaped facades (core/context/seed/).
Layout = Literal["seed", "cache"]
LAYOUTS: tuple[Layout, ...] = ("seed", "cache")


def check_layout(layout: str) -> Layout:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    return "seed" if layout == "seed" else "cache"


class SystemPrompt:
    """The system prompt's material and its assembler, kept from turn to turn.

    Unchanged components keep their token counts in the assembler; anything a turn does
    not ask for is removed before assembling, so nothing of a previous turn remains.
    """

    def __init__(
        self,
        workspace: Workspace,
        counter: TokenCounter,
        *,
        max_tokens: int,
        bot_name: str = "chatterd",
        timezone: str = "UTC",
        clock: WallClock | None = None,
        tool_guide: str | None = None,
        components: Sequence[SystemComponent] = (),
        order: Order = "insertion",
        skills: SkillsLoader | None = None,
    ) -> None:
        self.workspace = workspace
        self.skills = skills or SkillsLoader(workspace.skills_dir)
        self.tool_guide = tool_guide
        self.extra_components = tuple(components)
        self.tz = ZoneInfo(timezone)
        self.clock = clock or (lambda: datetime.now(UTC))
        runtime = f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
        self.identity = (
            f"You are {bot_name}, a chat assistant.\nRuntime: {runtime}.\n" + workspace.describe()
        )
        self.order: Order = order
        self._assembler = ContextAssembler(max_tokens, counter, order)
        self._names: list[str] = []  # the assembler's components, in insertion order
        self.persona = "workspace"  # where the last `components` took the persona from

    def now(self) -> datetime:
        """The trusted current time, in the configured time zone."""
        now = self.clock()
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        return now.astimezone(self.tz)

    def components(
        self,
        skill_names: Sequence[str] | None,
        turn_parts: Sequence[SystemComponent],
        channel: str | None,
        chat_id: str | None,
        layout: Layout = "cache",
        persona_chat: tuple[str, str] | None = None,
    ) -> list[SystemComponent]:
        """Every component of this turn, in `layout`'s order (see Layout).

        `persona_chat` (platform, chat id) lets that chat's own persona files replace the
        workspace's; they stay in the stable head, so each chat keeps its cached prefix.
        """
        now = self.now()
        crit, high = ComponentPriority.CRITICAL, ComponentPriority.HIGH
        cache = check_layout(layout) == "cache"
        identity = SystemComponent(IDENTITY, self.identity, crit, truncatable=False)
        clock = SystemComponent(TIME, time_text(now), crit, truncatable=False, tail=cache)
        guide = [SystemComponent(TOOL_GUIDE, self.tool_guide, high)] if self.tool_guide else []
        files = self.workspace.bootstrap_files(persona_chat)
        persona = [SystemComponent(f.name, f.content, high) for f in files]
        notes = self._memory_notes(now.date())
        if cache:
            # Stable first, volatile last: what every chat shares, then what this chat
            # keeps (persona, summary, added after), then the tail only this turn has.
            parts = [identity, *persona, *guide, *self._skills(skill_names), *notes]
            parts += [*self.extra_components, clock]
        else:
            # Seed 000 §3.3: identity (its time and the tools it has), bootstrap files,
            # memory (long-term, today's note), always-on skills, the skills summary.
            parts = [identity, clock, *guide, *persona, *notes, *self._skills(skill_names)]
            parts += [replace(p, tail=False) for p in self.extra_components]
        if channel or chat_id:
            parts.append(
                SystemComponent(
                    SESSION,
                    f"Channel: {channel or '?'}\nChat ID: {chat_id or '?'}",
                    crit,
                    truncatable=False,
                    tail=cache,
                )
            )
        self.persona = persona_source(
            [f.name for f in files if "/" in f.name],
            any(p.name == CHAT_PERSONA and p.content.strip() for p in turn_parts),
        )
        by_name = {p.name: i for i, p in enumerate(parts)}
        for part in turn_parts:
            if not part.content or not part.content.strip():
                continue
            if not cache and part.tail:
                part = replace(part, tail=False)  # one system prompt: nothing after history
            if part.name in by_name:
                parts[by_name[part.name]] = part
            else:
                by_name[part.name] = len(parts)
                parts.append(part)
        return parts

    def assemble(self, wanted: list[SystemComponent], room: int, share: float = 0.0) -> str:
        """The prompt of exactly `wanted` within `room` tokens ("" when nothing is wanted).

        Returns the head (the components not marked `tail`); `tail()` is the rest, planned
        in the same budget.

        `share` is the part of the room the prompt should leave to the history; the
        non-truncatable components may still take it if they need it.
        """
        self._sync(wanted)
        if room < 1:
            raise ContextOverflowError([(p.name, 0) for p in wanted if not p.truncatable], 1, room)
        capped = max(1, int(room * (1 - share)))
        self._assembler.max_tokens = capped
        try:
            return self._assembler.assemble()
        except ContextOverflowError:
            if capped >= room:
                raise
            self._assembler.max_tokens = room  # the rules must fit even if history shrinks
            return self._assembler.assemble()

    def tail(self) -> str:
        """The last `assemble`'s tail: this turn's own material, sent after the history."""
        return self._assembler.assembled_tail()

    def summary(self) -> dict[str, Any]:
        """What the last `assemble` kept, truncated and dropped (the assembler's summary)."""
        return self._assembler.get_summary()

    def _memory_notes(self, today: date) -> list[SystemComponent]:
        names = {"memory/MEMORY.md": "Workspace memory"}
        return [
            SystemComponent(
                names.get(f.name, f"Notes for {today.isoformat()}"),
                f.content,
                ComponentPriority.MEDIUM,
            )
            for f in self.workspace.memory_notes(today)
        ]

    def _skills(self, skill_names: Sequence[str] | None) -> list[SystemComponent]:
        found = self.skills.list_skills()
        if not found:
            return []
        requested = set(skill_names or ())
        unknown = requested - {s.name for s in found}
        if unknown:
            log.warning("requested skill(s) not found: %s", ", ".join(sorted(unknown)))
        full = [s for s in found if s.name in requested or (s.always and s.available)]
        rest = [s for s in found if s not in full]
        parts = [
            SystemComponent(f"Skill {s.name}", skill_full_text(s), ComponentPriority.LOW)
            for s in full
        ]
        summary = skills_summary_xml(rest)
        if summary:
            parts.append(SystemComponent(SKILLS_SUMMARY, summary, ComponentPriority.OPTIONAL))
        return parts

    def _sync(self, wanted: list[SystemComponent]) -> None:
        """Make the assembler hold exactly `wanted`, keeping counts of what is unchanged."""
        names = [p.name for p in wanted]
        wanted_set = set(names)
        kept = [n for n in self._names if n in wanted_set]
        kept_set = set(kept)
        after = kept + [n for n in names if n not in kept_set]
        priority = {p.name: (p.tail, -int(p.priority)) for p in wanted}
        if self.order == "insertion":
            priority = {p.name: (p.tail, 0) for p in wanted}
        if _rendered_order(after, priority) != _rendered_order(names, priority):
            self._assembler.clear()  # the order of equals would differ: start afresh
            after = names
        else:
            for name in self._names:
                if name not in wanted_set:
                    self._assembler.remove_component(name)
        for part in wanted:
            self._assembler.add_component(
                part.name, part.content, part.priority, part.truncatable, tail=part.tail
            )
        self._names = after


def _rendered_order(names: list[str], key: dict[str, tuple[bool, int]]) -> list[str]:
    return [n for _, n in sorted(enumerate(names), key=lambda p: (key[p[1]], p[0]))]


def persona_source(chat_files: Sequence[str], set_in_chat: bool) -> str:
    """Which persona a turn used, for the context report: the workspace's files, this
    chat's own files (named), a line set with `/bot persona`, or a chat file and a line."""
    sources = [f"chat file {', '.join(chat_files)}"] if chat_files else []
    if set_in_chat:
        sources.append("set by /bot persona")
    return " + ".join(sources) or "workspace"
