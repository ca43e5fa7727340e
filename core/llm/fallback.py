"""A model that is never just down: the primary endpoint, then each fallback in order.

Why a cool-down: a dead endpoint would otherwise add its whole timeout (and retries)
to every turn before the fallback answers. After a failure an endpoint is skipped for
`cooldown_s`, then tried again; if every endpoint is cooling down, the one whose
cool-down ends first is tried anyway rather than failing without trying.

Only failures that are the endpoint's fault move on (timeouts, connection errors, 5xx,
429 after retries, refused keys; see `is_endpoint_fault`); a rejected request (400)
would fail anywhere and is raised at once. A refused key also gets one loud WARNING per
cool-down, naming the host and model, never the key. A stream falls back only while
nothing has been yielded, so the consumer never sees two answers spliced together.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import asdict, dataclass
from typing import Any, Literal, Unpack

from core.clock import Ticker
from core.llm.errors import LLMError, LLMErrorKind, is_endpoint_fault
from core.llm.provider import ChatOptions, ChatResult, LLMProvider, StreamDone, StreamEvent

log = logging.getLogger(__name__)

EndpointState = Literal["ok", "cooling_down", "unknown"]


@dataclass(frozen=True)
class EndpointHealth:
    """One endpoint as /healthz shows it (no key, no URL path)."""

    endpoint: str  # host[:port]
    model: str
    role: Literal["primary", "fallback"]
    state: EndpointState  # unknown: not called since start or since its cool-down ended
    last_error: LLMErrorKind | None
    retry_in_s: float  # 0 unless cooling down


@dataclass
class _Slot:
    provider: LLMProvider
    cool_until: float = 0.0
    answered_last: bool | None = None  # None: no outcome since start / since cool-down
    last_error: LLMErrorKind | None = None
    key_warned_until: float = 0.0


class FallbackProvider:
    """An `LLMProvider` over several providers, tried in order with a cool-down each."""

    def __init__(
        self,
        providers: Sequence[LLMProvider],
        *,
        cooldown_s: float = 60.0,
        clock: Ticker = time.monotonic,
        config_key: str = "[llm]",
    ) -> None:
        if not providers:
            raise ValueError("FallbackProvider needs at least one provider")
        if cooldown_s < 0:
            raise ValueError("cooldown_s must be >= 0")
        self._slots = [_Slot(p) for p in providers]
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._config_key = config_key
        primary = providers[0]
        self.model = primary.model
        self.endpoint = primary.endpoint

    async def chat(
        self, messages: list[dict[str, Any]], **options: Unpack[ChatOptions]
    ) -> ChatResult:
        failures: list[tuple[_Slot, LLMError]] = []
        for slot in self._order():
            try:
                result = await slot.provider.chat(messages, **options)
            except LLMError as error:
                if not is_endpoint_fault(error):
                    raise
                self._failed(slot, error)
                failures.append((slot, error))
                continue
            self._answered(slot)
            return result
        raise _all_failed(failures)

    async def stream_chat(
        self, messages: list[dict[str, Any]], **options: Unpack[ChatOptions]
    ) -> AsyncGenerator[StreamEvent, None]:
        """TextDelta* then one StreamDone, from the first endpoint that starts answering."""
        failures: list[tuple[_Slot, LLMError]] = []
        for slot in self._order():
            shown = False
            stream = slot.provider.stream_chat(messages, **options)
            try:
                async with aclosing(stream) as events:
                    async for event in events:
                        if isinstance(event, StreamDone):
                            self._answered(slot)
                        shown = True
                        yield event
                return
            except LLMError as error:
                if not is_endpoint_fault(error):
                    raise
                self._failed(slot, error)
                if shown:
                    raise  # text is out: another endpoint's answer cannot be spliced on
                failures.append((slot, error))
        raise _all_failed(failures)

    def health(self) -> list[dict[str, Any]]:
        """Each endpoint's state, JSON-ready: endpoint, model, role, state, last_error,
        retry_in_s. Never a key."""
        return [asdict(status) for status in self.statuses()]

    def statuses(self) -> list[EndpointHealth]:
        now = self._clock()
        return [
            EndpointHealth(
                endpoint=slot.provider.endpoint,
                model=slot.provider.model,
                role="primary" if index == 0 else "fallback",
                state=_state(slot, now),
                last_error=slot.last_error,
                retry_in_s=round(max(0.0, slot.cool_until - now), 1),
            )
            for index, slot in enumerate(self._slots)
        ]

    async def close(self) -> None:
        for slot in self._slots:
            await slot.provider.close()

    # -- bookkeeping --------------------------------------------------------------------

    def _order(self) -> list[_Slot]:
        """Endpoints not cooling down, in order; else the one that recovers first."""
        now = self._clock()
        ready = [slot for slot in self._slots if slot.cool_until <= now]
        return ready or [min(self._slots, key=lambda slot: slot.cool_until)]

    def _answered(self, slot: _Slot) -> None:
        if slot.answered_last is False and len(self._slots) > 1:
            log.info(
                "model endpoint %s (%s) is answering again",
                slot.provider.endpoint,
                slot.provider.model,
            )
        slot.cool_until = 0.0
        slot.answered_last = True

    def _failed(self, slot: _Slot, error: LLMError) -> None:
        now = self._clock()
        was_cooling = slot.cool_until > now
        slot.cool_until = max(slot.cool_until, now + self._cooldown_s)
        slot.answered_last = False
        slot.last_error = error.kind
        provider = slot.provider
        if error.kind == "auth" and now >= slot.key_warned_until:
            slot.key_warned_until = slot.cool_until
            log.warning(
                "THE API KEY WAS REFUSED by the model endpoint %s (model %s, HTTP %s): "
                "fix its api_key in %s%s",
                provider.endpoint,
                provider.model,
                error.status,
                self._config_key,
                self._next_step(),
            )
        elif not was_cooling and len(self._slots) > 1:
            log.warning(
                "model endpoint %s (%s) failed (%s)%s",
                provider.endpoint,
                provider.model,
                error.kind,
                self._next_step(),
            )

    def _next_step(self) -> str:
        if len(self._slots) == 1:
            return ""
        return f"; using the next endpoint and skipping this one for {self._cooldown_s:g}s"


def _state(slot: _Slot, now: float) -> EndpointState:
    if slot.cool_until > now:
        return "cooling_down"
    return "ok" if slot.answered_last else "unknown"


def _all_failed(failures: list[tuple[_Slot, LLMError]]) -> LLMError:
    """One endpoint: its own error unchanged. Several: the last kind, every host named."""
    if len(failures) == 1:
        return failures[0][1]
    last = failures[-1][1]
    tried = ", ".join(f"{slot.provider.endpoint} ({error.kind})" for slot, error in failures)
    return LLMError(last.kind, f"every model endpoint failed: {tried}", status=last.status)
