"""Metering model calls: what each one cost, for whom, and why it was made.

Why a seam and not a counter inside the provider: only the code that makes a call knows
whose turn it belongs to, so it hands the answered calls to the `UsageMeter` it was
given. `UsageRecorder` records the API's `usage`, else our own count (flagged as
estimated). A meter never fails a turn: a write that does not go through is logged and
dropped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal, Protocol

from core.clock import WallClock, utc_now
from core.llm.provider import ChatResult
from core.messages import InboundMessage
from core.text.tokens import TokenCounter, count_messages
from memory.usage.types import UsageDelta, UsageSink

log = logging.getLogger(__name__)

Purpose = Literal["reply", "vision", "compaction", "transcription", "speech", "image", "digest"]
# The user id compaction is recorded under when nobody's turn triggered it (a library
# caller of Compactor.fold without `who`): the chat pays, no person does.
UNATTRIBUTED = "(chat)"
UNKNOWN_MODEL = "(unknown)"


@dataclass(frozen=True)
class UsageSubject:
    """Whom a model call is counted for: one user in one chat on one platform."""

    platform: str
    chat_id: str
    user_id: str

    @classmethod
    def of(cls, message: InboundMessage) -> UsageSubject:
        return cls(message.platform, message.chat_id, message.sender_id)


@dataclass(frozen=True)
class ModelCall:
    """One answered request: the result, and the messages it was asked with (counted by
    us only when the endpoint reported no usage)."""

    result: ChatResult
    messages: Sequence[Mapping[str, Any]]


class UsageMeter(Protocol):
    """Where the code that calls a model reports what the calls cost."""

    async def record(self, who: UsageSubject, calls: Sequence[ModelCall], purpose: Purpose) -> None:
        """Count `calls` for `who`; never raises for a storage problem."""


@dataclass(frozen=True)
class CallCost:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool  # the endpoint did not say; these are our counts


def call_cost(call: ModelCall, counter: TokenCounter) -> CallCost:
    """The API's numbers when it gave them; else our count of the request and answer."""
    result = call.result
    prompt, completion = result.prompt_tokens, result.completion_tokens
    estimated = prompt is None or completion is None
    if prompt is None:
        prompt = count_messages(call.messages, counter)
    if completion is None:
        completion = counter.count(result.text or "")
        if result.tool_calls:
            completion += counter.count(json.dumps(result.tool_calls, ensure_ascii=False))
    return CallCost(prompt, completion, estimated)


class UsageRecorder:
    """The daemon's `UsageMeter`: one upsert per recorded batch, on the UTC day of `clock`."""

    def __init__(
        self, sink: UsageSink, counter: TokenCounter, *, clock: WallClock = utc_now
    ) -> None:
        self._sink = sink
        self._counter = counter
        self._clock = clock

    async def record(self, who: UsageSubject, calls: Sequence[ModelCall], purpose: Purpose) -> None:
        if not calls:
            return
        day = self._clock().astimezone(UTC).date()
        deltas = []
        for call in calls:
            cost = call_cost(call, self._counter)
            deltas.append(
                UsageDelta(
                    day=day,
                    platform=who.platform,
                    chat_id=who.chat_id,
                    user_id=who.user_id,
                    model=call.result.model or UNKNOWN_MODEL,
                    purpose=purpose,
                    prompt_tokens=cost.prompt_tokens,
                    completion_tokens=cost.completion_tokens,
                    calls=1,
                    estimated_calls=int(cost.estimated),
                    cached_tokens=min(call.result.cached_tokens or 0, cost.prompt_tokens),
                )
            )
        try:
            await self._sink.add(deltas)
        except Exception as exc:  # a storage hiccup must not cost the user their answer
            log.warning(
                "usage of %d %s call(s) in %s:%s not recorded: %s",
                len(deltas),
                purpose,
                who.platform,
                who.chat_id,
                type(exc).__name__,
            )

    async def record_image(
        self, who: UsageSubject, model: str, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None:
        """One drawn picture (purpose "image", one call): what the provider reported it
        cost in tokens, 0 when it reported nothing (then the count of calls is the cost)."""
        day = self._clock().astimezone(UTC).date()
        delta = UsageDelta(
            day=day,
            platform=who.platform,
            chat_id=who.chat_id,
            user_id=who.user_id,
            model=model or UNKNOWN_MODEL,
            purpose="image",
            prompt_tokens=max(0, prompt_tokens),
            completion_tokens=max(0, completion_tokens),
            calls=1,
        )
        try:
            await self._sink.add([delta])
        except Exception as exc:  # the picture is drawn; a lost count must not lose it
            log.warning(
                "usage of an image in %s:%s not recorded: %s",
                who.platform,
                who.chat_id,
                type(exc).__name__,
            )
