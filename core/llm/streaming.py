"""Folding a streamed chat completion back into one answer.

OpenAI-compatible servers stream `chat.completion.chunk` objects: text as content
deltas, native tool calls as fragments keyed by `index` (the id, type and name come
first, the JSON arguments in pieces), the finish reason near the end, and with
`stream_options.include_usage` a last chunk with no choices and the usage. The SDK
parses chunks leniently, so every field is checked here before it is trusted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

from core.llm.cached import cached_prompt_tokens
from core.llm.provider import ChatResult

T = TypeVar("T")


class StreamStalled(Exception):
    """Nothing arrived on the stream for the stall limit."""


async def next_within(chunks: AsyncIterator[T], stall_s: float) -> T:
    """The next chunk, or StreamStalled after `stall_s` of silence.

    The limit covers only the wait for the server, never the time the consumer spends
    between chunks (a slow Telegram edit must not count as a stalled model).
    StopAsyncIteration passes through when the stream ends.
    """
    try:
        async with asyncio.timeout(stall_s):
            return await anext(chunks)
    except TimeoutError:
        raise StreamStalled from None


@dataclass
class _CallParts:
    id: str | None = None
    type: str | None = None
    name: str | None = None
    arguments: str = ""


class StreamAssembler:
    """Collects one stream's chunks; `add` returns the text each one adds, if any."""

    def __init__(self, *, model: str, endpoint: str) -> None:
        self._default_model = model
        self._endpoint = endpoint
        self._model: str | None = None
        self._text: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._finish: str | None = None
        self._prompt_tokens: int | None = None
        self._completion_tokens: int | None = None
        self._cached_tokens: int | None = None
        self.chunks = 0

    def add(self, chunk: Any) -> str:
        """Take one chunk; TypeError/ValueError when it is not a chat completion chunk."""
        self.chunks += 1
        model = getattr(chunk, "model", None)
        if isinstance(model, str) and model:
            self._model = model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._prompt_tokens = _count(getattr(usage, "prompt_tokens", None))
            self._completion_tokens = _count(getattr(usage, "completion_tokens", None))
            self._cached_tokens = cached_prompt_tokens(usage)
        choices = getattr(chunk, "choices", None) or []
        if not isinstance(choices, list):
            raise TypeError("choices is not a list")
        piece = ""
        for choice in choices:
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is never asked for; ignore other choices
            piece += self._add_choice(choice)
        return piece

    def result(self) -> ChatResult:
        calls = [_call_dict(self._calls[index]) for index in sorted(self._calls)]
        return ChatResult(
            text="".join(self._text),
            model=self._model or self._default_model,
            finish_reason=self._finish,
            prompt_tokens=self._prompt_tokens,
            completion_tokens=self._completion_tokens,
            tool_calls=calls,
            endpoint=self._endpoint,
            cached_tokens=self._cached_tokens,
        )

    def _add_choice(self, choice: Any) -> str:
        finish = getattr(choice, "finish_reason", None)
        if finish is not None:
            if not isinstance(finish, str):
                raise TypeError("finish_reason is not text")
            self._finish = finish
        delta = getattr(choice, "delta", None)
        if delta is None:
            return ""
        for fragment in getattr(delta, "tool_calls", None) or []:
            self._add_call_fragment(fragment)
        content = getattr(delta, "content", None)
        if content is None:
            return ""
        if not isinstance(content, str):
            raise TypeError("content is not text")
        if content:
            self._text.append(content)
        return content

    def _add_call_fragment(self, fragment: Any) -> None:
        index = getattr(fragment, "index", None)
        if not isinstance(index, int):
            raise TypeError("tool call fragment without an index")
        parts = self._calls.setdefault(index, _CallParts())
        parts.id = parts.id or _text_or_none(getattr(fragment, "id", None))
        parts.type = parts.type or _text_or_none(getattr(fragment, "type", None))
        function = getattr(fragment, "function", None)
        if function is None:
            return
        # The name arrives whole in the first fragment; the arguments in pieces.
        parts.name = parts.name or _text_or_none(getattr(function, "name", None))
        parts.arguments += _text_or_none(getattr(function, "arguments", None)) or ""


def _call_dict(parts: _CallParts) -> dict[str, Any]:
    """The same shape `chat` returns for a non-streamed tool call."""
    call: dict[str, Any] = {
        "type": parts.type or "function",
        "function": {"name": parts.name or "", "arguments": parts.arguments},
    }
    if parts.id:
        call = {"id": parts.id, **call}
    return call


def _text_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("expected text in a tool call fragment")
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
