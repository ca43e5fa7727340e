"""What a streamed reply may show while the model is still writing.

Why: in markers mode the model writes tool markers (`[Search: ...]`) into its text.
A preview must never show one, not even half of one, so a trailing "[" that may grow
into a marker is held back until the next characters settle it, and complete or broken
markers are removed exactly as the final reply removes them.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

from core.llm import ChatResult, LLMError, LLMProvider, StreamDone, TextDelta
from core.streaming import PreviewSink
from core.tools.registry import ToolRegistry


def visible_text(registry: ToolRegistry, text: str) -> str:
    """`text` (one round so far) as a preview may show it: no marker, whole or partial."""
    start = text.rfind("[")
    if start != -1:
        tail = text[start:]
        if "]" not in tail and "\n" not in tail and registry.may_open_marker(tail):
            text = text[:start]
    return registry.strip_markers(text)


async def streamed_round(
    llm: LLMProvider,
    registry: ToolRegistry,
    convo: list[dict[str, Any]],
    preview: PreviewSink,
    *,
    status: str,
    max_tokens: int | None,
    temperature: float | None,
    tools: list[dict[str, Any]] | None,
) -> ChatResult:
    """One model call as a stream: the preview follows the visible text (or keeps showing
    `status`, the line of the tool that ran before, until text appears)."""
    text = ""
    shown = status
    stream = llm.stream_chat(convo, max_tokens=max_tokens, temperature=temperature, tools=tools)
    async with aclosing(stream) as events:
        async for event in events:
            if isinstance(event, StreamDone):
                return event.result
            if isinstance(event, TextDelta):
                text += event.text
                wanted = visible_text(registry, text) or status
                if wanted != shown:
                    shown = wanted
                    await preview(wanted)
    raise LLMError("unavailable", f"the stream from {llm.endpoint} ended without an answer")
