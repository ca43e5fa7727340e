"""ContextEngine: the daemon's one path from a turn's material to what the model sees.

The system prompt, the fitted history and the current message share one window; built
in one place, the budget is exact (system + history + current + reply reserve <= window,
as `count_messages` counts) and the report says precisely what was kept and dropped. The
engine caches file contents and token counts but no user state: every `build` is given
its sender's material and nothing else survives it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from core.clock import WallClock
from core.context.assembler import ComponentPriority, Order
from core.context.budget import framing_tokens, oldest_to_drop, resolve_counter
from core.context.compaction import SUMMARY_COMPONENT, summary_text
from core.context.history import HistoryFit, MessageCost, fit_history
from core.context.history_views import TurnHistory, Uncounted, as_history_items
from core.context.parts import (
    KNOWLEDGE_COMPONENT,
    TOOL_GUIDE,
    SystemComponent,
    chat_persona_component,
    memory_component,
    retrieved_component,
    session_component,
)
from core.context.report import BuiltContext, ContextReport, SummaryInfo
from core.context.system_prompt import Layout, SystemPrompt, check_layout
from core.context.tail import TurnMaterial, unforgeable, with_turn_context, wrapped
from core.context.truncation import cut_message
from core.context.turn import TurnInput
from core.media.data_url import ImageEncoder, MediaSource
from core.text.tokens import REPLY_PRIMER_TOKENS, TokenCounter, message_tokens
from core.workspace.files import Workspace
from core.workspace.skills import SkillsLoader

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 16000
DEFAULT_REPLY_TOKENS = 1024


@dataclass
class _Current:
    message: dict[str, Any]
    tokens: int
    truncated: bool = False
    images: int = 0


class ContextEngine:
    """Builds OpenAI chat messages for one turn within `max_tokens - reply_tokens`.

    `workspace` holds the bootstrap files, memory notes and skills (see README). Static
    parts are re-read only when a file changes; token counts of unchanged system
    components are reused from turn to turn. `history_share` is the part of the room left
    after the reply reserve and the current message that the system prompt may not take
    (so low-priority material cannot crowd out the recent conversation), unless its
    non-truncatable components need it. The system prompt's material and assembler are
    `system` (a SystemPrompt). Not thread-safe: use one engine per thread (in asyncio,
    `build` is synchronous and so never interleaves).

    Builds use the prompt-cache order (`layout="cache"`, see Layout) unless told
    otherwise; `layout="seed"` gives seed 000's single system prompt.
    """

    # The order `build` uses when not told: the daemon's. The seed facade (core/context/
    # seed/builder.py) sets its own, so one signature serves both.
    layout: ClassVar[Layout] = "cache"

    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        *,
        max_tokens: int | None = None,
        token_counter: TokenCounter | str | None = None,
        reply_tokens: int = DEFAULT_REPLY_TOKENS,
        bot_name: str = "chatterd",
        timezone: str = "UTC",
        clock: WallClock | None = None,
        tool_guide: str | None = None,
        components: Sequence[SystemComponent] = (),
        history_share: float = 0.25,
        order: Order = "insertion",
        skills: SkillsLoader | None = None,
        image_encoder: ImageEncoder | None = None,
        turn_material: TurnMaterial = "system",
    ) -> None:
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
        self.reply_tokens = int(reply_tokens)
        if self.reply_tokens < 0 or self.max_tokens - self.reply_tokens < 64:
            raise ValueError(
                f"max_tokens ({self.max_tokens}) must exceed reply_tokens ({self.reply_tokens}) "
                "by at least 64"
            )
        if not 0 <= history_share < 1:
            raise ValueError("history_share must be in [0, 1)")
        if turn_material not in ("system", "user"):
            raise ValueError(f"turn_material must be 'system' or 'user', not {turn_material!r}")
        self.turn_material: TurnMaterial = turn_material
        self.counter: TokenCounter = resolve_counter(token_counter)
        self.history_share = history_share
        self.images = image_encoder or ImageEncoder()
        self.system = SystemPrompt(
            self.workspace,
            self.counter,
            max_tokens=self.max_tokens,
            bot_name=bot_name,
            timezone=timezone,
            clock=clock,
            tool_guide=tool_guide,
            components=components,
            order=order,
            skills=skills,
        )
        self._cost = MessageCost(self.counter)
        self._system_framing = framing_tokens("system", self.counter)
        self._user_framing = framing_tokens("user", self.counter)
        # The user-message construction's tags, plus what merging at its edges may add.
        self._wrap_reserve = 0
        if turn_material == "user":
            self._wrap_reserve = self.counter.count(wrapped("")) + 4

    def build(
        self,
        history: Sequence[Any],
        current_message: str,
        *,
        current_tokens: int | None = None,
        images: Sequence[Mapping[str, Any]] = (),
        media: Sequence[MediaSource] | None = None,
        components: Sequence[SystemComponent] = (),
        skill_names: Sequence[str] | None = None,
        channel: str | None = None,
        chat_id: str | None = None,
        max_history_items: int | None = None,
        recount: bool = False,
        reserved_tokens: int = 0,
        layout: Layout | None = None,
        persona_chat: tuple[str, str] | None = None,
    ) -> BuiltContext:
        """Messages and report for one turn.

        `history` is oldest first: HistoryItems, OpenAI message dicts, or stored turns
        (anything with `token_count` and `kind`); it is read from the end and never
        copied. `current_tokens` is the stored count of `current_message` (counted when
        None). `images` are ready `image_url` parts, `media` files to encode. `components`
        are this turn's system material (session rule, sender memory, tool guide,
        retrieved text); one named like a built-in replaces it. `recount` re-tokenizes
        the kept history instead of trusting stored counts (for counts of unknown origin).
        `layout` is "cache" (the daemon's: this turn's material after the history; see
        Layout) or "seed" (one system message, `[system, *history, user]`); None is the
        class's own (`layout`).
        """
        chosen = check_layout(self.layout if layout is None else layout)
        cache = chosen == "cache"
        limit = self.max_tokens - self.reply_tokens - max(0, reserved_tokens)  # tool definitions
        current = self._current(current_message, current_tokens, images, media, limit)
        # Room for the system messages' framing: the head, and in the cache layout the tail.
        wrap_reserve = self._wrap_reserve if cache else 0
        room = limit - REPLY_PRIMER_TOKENS - (2 if cache else 1) * self._system_framing
        room -= current.tokens + wrap_reserve
        wanted = self.system.components(
            skill_names, components, channel, chat_id, chosen, persona_chat
        )
        head = self.system.assemble(wanted, room, share=self.history_share)
        tail = self.system.tail()
        summary = self.system.summary() if head or tail else {"components": []}
        tail_tokens = summary.get("tail_tokens", 0)
        head_tokens = summary.get("total_tokens", 0) - tail_tokens
        system_tokens = head_tokens + (self._system_framing if head else 0)
        system_tokens += tail_tokens + (self._system_framing if tail else 0)

        items = as_history_items(history)
        budget = limit - REPLY_PRIMER_TOKENS - system_tokens - current.tokens - wrap_reserve
        cost = MessageCost(self.counter) if recount else self._cost
        if recount:
            items = Uncounted(items)
        fit = fit_history(items, max(0, budget), cost, max_items=max_history_items)

        history_messages = fit.messages()
        if tail and self.turn_material == "user":
            history_messages, fit = self._unforgeable_history(history_messages, fit)
            current, system_tokens = self._tail_in_user(current, tail, system_tokens)
            tail = ""
        messages: list[dict[str, Any]] = []
        if head:
            messages.append({"role": "system", "content": head})
        messages.extend(history_messages)
        if tail:
            messages.append({"role": "system", "content": tail})
        messages.append(current.message)
        total = REPLY_PRIMER_TOKENS + system_tokens + fit.tokens + current.tokens
        fit, messages, total = self._verify(fit, messages, total, limit)
        report = ContextReport(
            window=self.max_tokens,
            reply_reserve=self.reply_tokens,
            budget=limit,
            total_tokens=total,
            system_tokens=system_tokens,
            history_tokens=fit.tokens,
            current_tokens=current.tokens,
            exact=bool(self.counter.exact),
            tokenizer=self.counter.name,
            components=[dict(c) for c in summary["components"]],
            history_kept=fit.kept,
            history_dropped=fit.start,
            included_ids=fit.kept_ids,
            dropped_ranges=[(items[0].id, items[fit.start - 1].id)] if fit.start else [],
            history_tokenized=fit.tokenized,
            group_cut=fit.group_cut,
            current_truncated=current.truncated,
            images=current.images,
            persona=self.system.persona,
        )
        return BuiltContext(messages=messages, report=report)

    def build_turn(self, turn: TurnInput, *, layout: Layout = "cache") -> BuiltContext:
        """The daemon's seam (core.context.turn.TurnContextBuilder): one stored turn, in
        the cache layout (this turn's material after the history) unless told otherwise."""
        msg = turn.message
        parts = [
            session_component(
                sender_name=msg.sender_name,
                sender_id=msg.sender_id,
                platform=msg.platform,
                chat_id=msg.chat_id,
                chat_type=msg.chat_type.value,
            ),
            memory_component(msg.sender_name, [m.content for m in turn.memories]),
        ]
        if turn.tool_guide:
            parts.append(SystemComponent(TOOL_GUIDE, turn.tool_guide, ComponentPriority.HIGH))
        if turn.chat_persona:
            parts.append(
                chat_persona_component(
                    turn.chat_persona, platform=msg.platform, chat_id=msg.chat_id
                )
            )
        if summary := summary_text(turn.summary, turn.summary_through):
            parts.append(SystemComponent(SUMMARY_COMPONENT, summary, ComponentPriority.MEDIUM))
        if turn.knowledge is not None:  # LOW, in the tail: cut first, after the history
            parts.append(retrieved_component(turn.knowledge.text, KNOWLEDGE_COMPONENT))
        built = self.build(
            TurnHistory(turn.history),
            turn.user_content,
            current_tokens=turn.user_tokens,
            images=turn.image_parts,
            components=parts,
            reserved_tokens=turn.tool_tokens,
            layout=layout,
            persona_chat=(msg.platform, msg.chat_id),
        )
        if turn.tool_tokens or turn.tools_dropped or turn.knowledge is not None:
            report = replace(
                built.report,
                tool_tokens=turn.tool_tokens,
                tools_dropped=turn.tools_dropped,
                knowledge=turn.knowledge,
            )
            built = BuiltContext(built.messages, report)
        if turn.summary is None:
            return built
        folded = (turn.summary.meta or {}).get("turns", 0)
        shown = SummaryInfo(turn.summary.id, turn.summary_through, folded)
        return BuiltContext(built.messages, replace(built.report, summary=shown))

    # -- parts --------------------------------------------------------------------------

    def _unforgeable_history(
        self, messages: list[dict[str, Any]], fit: HistoryFit
    ) -> tuple[list[dict[str, Any]], HistoryFit]:
        """History with the <turn_context> tag made plain text; a message that changed
        (rare: someone typed the tag) is recounted, so the total stays exact."""
        out, extra = [], 0
        for message in messages:
            safe = unforgeable(message)
            if safe != message:
                extra += message_tokens(safe, self.counter) - message_tokens(message, self.counter)
            out.append(safe)
        if extra:
            fit = replace(fit, tokens=fit.tokens + extra)
        return out, fit

    def _tail_in_user(
        self, current: _Current, tail: str, system_tokens: int
    ) -> tuple[_Current, int]:
        """The fallback construction: the tail as a <turn_context> block opening the user
        message, for endpoints that move or refuse a late system message. Users cannot
        write that tag (`unforgeable`), so the block stays as trusted as a system message.

        The tail's own tokens stay under the system prompt in the report; the current
        message carries the rest of the combined message's exact count.
        """
        message = with_turn_context(current.message, tail)
        combined = message_tokens(message, self.counter)
        tail_tokens = self.system.summary().get("tail_tokens", 0)
        rest = max(0, combined - tail_tokens)
        system_tokens += (combined - rest) - tail_tokens - self._system_framing
        return replace(current, message=message, tokens=rest), system_tokens

    def _current(
        self,
        text: str,
        tokens: int | None,
        images: Sequence[Mapping[str, Any]],
        media: Sequence[MediaSource] | None,
        limit: int,
    ) -> _Current:
        parts = [dict(p) for p in images] + self.images.image_parts(media)
        if tokens is None or tokens < 0:
            tokens = self.counter.count(text)
        image_cost = self._parts_cost(parts)
        cap = (limit - REPLY_PRIMER_TOKENS - self._system_framing) // 2
        truncated = False
        while parts and self._user_framing + tokens + image_cost > cap:
            parts.pop()  # images go before words do
            image_cost = self._parts_cost(parts)
        if self._user_framing + tokens + image_cost > cap:
            text, tokens = cut_message(self.counter, text, cap - self._user_framing - image_cost)
            truncated = True
            log.warning("current message cut to %d tokens to fit the context window", tokens)
        content: str | list[dict[str, Any]] = text
        if parts:
            content = [*parts, {"type": "text", "text": text}]
        message = {"role": "user", "content": content}
        return _Current(message, self._user_framing + tokens + image_cost, truncated, len(parts))

    def _parts_cost(self, parts: list[dict[str, Any]]) -> int:
        if not parts:
            return 0
        message = {"role": "user", "content": parts}
        return message_tokens(message, self.counter) - self._user_framing

    def _verify(
        self,
        fit: HistoryFit,
        messages: list[dict[str, Any]],
        total: int,
        limit: int,
    ) -> tuple[HistoryFit, list[dict[str, Any]], int]:
        """Never hand out more than `limit`: drop the oldest kept history until it fits.

        With stored counts from the same counter this never triggers (the arithmetic is
        `count_messages`' own); it guards against counts that disagree with the framing.
        """
        if total <= limit:
            return fit, messages, total
        log.error("context total %d over %d; dropping oldest history", total, limit)
        first = 1 if messages and messages[0]["role"] == "system" else 0
        kept = fit.items
        costs = [self._cost.of(item) for item in kept]
        gone = oldest_to_drop(costs, total - limit)
        shed = sum(costs[:gone])
        del messages[first : first + gone]
        total -= shed
        start = fit.start + gone
        fit = HistoryFit(
            start, fit.length, fit.tokens - shed, fit.tokenized, fit.group_cut, fit.source
        )
        return fit, messages, total


__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_REPLY_TOKENS", "ContextEngine"]
