"""ContextBuilder: nanobot's facade, in the seeds' shapes, over the daemon's engine.

Seeds 000/001 fix its public shape (one system prompt in seed 000's order,
`build_messages` as `[system, *history, user]`, the `add_*` helpers) and library users
rely on it: the seed order is its default, the cache order only an explicit option.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from core.context.engine import ContextEngine
from core.context.history_views import HistoryItem
from core.context.system_prompt import Layout
from core.media.data_url import MediaSource
from core.text.tokens import REPLY_PRIMER_TOKENS


class ContextBuilder(ContextEngine):
    """The engine with nanobot's methods; `build` and its methods default to the seed
    order, `build_turn` (the daemon's seam, inherited) to the cache order."""

    layout: ClassVar[Layout] = "seed"

    def build_system_prompt(
        self, skill_names: Sequence[str] | None = None, *, layout: Layout = "seed"
    ) -> str:
        """The system prompt alone, in seed 000's order: identity (with the time and the
        tool guide), bootstrap files, memory notes, always-on skills, the skills summary.

        `layout="cache"` gives the daemon's order instead (stable parts first, the time
        last), as one text.
        """
        budget = self.max_tokens - self.reply_tokens - REPLY_PRIMER_TOKENS
        budget -= 2 * self._system_framing
        wanted = self.system.components(skill_names, (), None, None, layout)
        head = self.system.assemble(wanted, budget)
        return "\n\n".join(t for t in (head, self.system.tail()) if t)

    def build_messages(
        self,
        history: Sequence[Mapping[str, Any]] | Sequence[HistoryItem],
        current_message: str,
        skill_names: Sequence[str] | None = None,
        media: Sequence[MediaSource] | None = None,
        channel: str | None = None,
        chat_id: str | None = None,
        *,
        layout: Layout = "seed",
    ) -> list[dict[str, Any]]:
        """Seed 001's `[system, *history, user]`: the system prompt (the session named at
        its end), the history that fits, the current message (with its images) last.

        `layout="cache"` sends the daemon's order: this turn's material (time, session) as
        a second system message after the history (docs/context-engine.md).
        """
        return self.build(
            history,
            current_message,
            skill_names=skill_names,
            media=media,
            channel=channel,
            chat_id=chat_id,
            layout=layout,
        ).messages

    @staticmethod
    def add_assistant_message(
        messages: list[dict[str, Any]],
        content: str | None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        *,
        tool_call_dicts: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Append the model's reply (and its tool calls) to `messages`; returns the list.

        `tool_call_dicts` is `tool_calls` by the name seed 001's example passes it as.
        """
        if tool_call_dicts is not None:
            if tool_calls is not None:
                raise TypeError("pass tool_calls or tool_call_dicts, not both")
            tool_calls = tool_call_dicts
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if tool_calls:
            message["tool_calls"] = [dict(call) for call in tool_calls]
        messages.append(message)
        return messages

    @staticmethod
    def add_tool_result(
        messages: list[dict[str, Any]], tool_call_id: str, tool_name: str, result: str
    ) -> list[dict[str, Any]]:
        """Append a tool's result for `tool_call_id`; returns the list."""
        messages.append(
            {"role": "tool", "tool_call_id": tool_call_id, "name": tool_name, "content": result}
        )
        return messages


__all__ = ["ContextBuilder"]
