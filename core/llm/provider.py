"""The model seam: what the processor, tool loop, compaction and vision need from a model.

A provider answers a chat either whole (`chat`) or as a stream of events
(`stream_chat`): `TextDelta`s while the model writes, then exactly one `StreamDone`
carrying the same `ChatResult` that `chat` would have returned.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable


@dataclass(frozen=True)
class ChatResult:
    """One completion: the text, why it stopped, and the tokens it cost (None if unknown).

    `model` is the model that answered (as the endpoint names it), and `endpoint` the
    host[:port] that served it, so usage can be counted per model even after a fallback.
    """

    text: str
    model: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI shape
    endpoint: str | None = None
    cached_tokens: int | None = None  # of prompt_tokens, served from the provider's cache


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's text, in order; the pieces join to `ChatResult.text`."""

    text: str


@dataclass(frozen=True)
class StreamDone:
    """The last event of a stream: the whole answer, with usage and native tool calls."""

    result: ChatResult


StreamEvent = TextDelta | StreamDone


class ChatOptions(TypedDict, total=False):
    """A call's settings beside its messages, spelled once for the Protocol and every
    provider (a fallback passes them on whole). Left out or None: the provider's own
    default (its configured temperature, no token limit, no native tools)."""

    max_tokens: int | None
    temperature: float | None
    tools: list[dict[str, Any]] | None


@runtime_checkable
class LLMProvider(Protocol):
    """A model behind one or more endpoints; every failure is an `LLMError`."""

    model: str
    endpoint: str  # host[:port] of the (first) endpoint; never a key

    async def chat(
        self, messages: list[dict[str, Any]], **options: Unpack[ChatOptions]
    ) -> ChatResult: ...

    def stream_chat(
        self, messages: list[dict[str, Any]], **options: Unpack[ChatOptions]
    ) -> AsyncGenerator[StreamEvent, None]:
        """TextDelta* then one StreamDone; raises LLMError from the iteration.

        Once a TextDelta has been yielded a failure is raised, never retried silently
        (that would repeat text the user has seen). Close it (`contextlib.aclosing`)
        when stopping early, so the connection is released at once.
        """
        ...

    async def close(self) -> None: ...
