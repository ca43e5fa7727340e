"""Providers built from the [llm] / [vision] settings (core reads them through Protocols;
the pydantic models live in bot.config, which core does not import)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from core.clock import Ticker
from core.llm.endpoint import OPENAI_BASE_URL, OpenAIProvider
from core.llm.fallback import FallbackProvider
from core.llm.provider import LLMProvider


class _Secret(Protocol):
    def get_secret_value(self) -> str: ...


class EndpointSettings(Protocol):
    """One `fallbacks` entry: its own URL, key and model (never the primary's key)."""

    @property
    def base_url(self) -> str: ...
    @property
    def api_key(self) -> _Secret | None: ...
    @property
    def model(self) -> str: ...


class LlmSettings(Protocol):
    """The [llm] keys this package reads (bot.config.LlmConfig)."""

    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key(self) -> _Secret | None: ...
    @property
    def model(self) -> str: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def temperature(self) -> float: ...
    @property
    def stream_stall_s(self) -> float: ...
    @property
    def cooldown_s(self) -> float: ...
    @property
    def fallbacks(self) -> Sequence[EndpointSettings]: ...


def provider_from_config(
    llm: LlmSettings,
    base_url_override: str | None = None,
    model_override: str | None = None,
) -> OpenAIProvider:
    """Build the primary provider from [llm]; the overrides point it at the embedded model."""
    return _endpoint(
        llm,
        base_url_override or llm.base_url or OPENAI_BASE_URL,
        llm.api_key,
        model_override or llm.model,
        temperature=llm.temperature,
    )


def with_fallbacks(
    primary: LLMProvider,
    llm: LlmSettings,
    *,
    entries: Sequence[EndpointSettings] | None = None,
    section: str = "[llm]",
    temperature: float | None = None,
    clock: Ticker = time.monotonic,
) -> FallbackProvider:
    """`primary`, then one provider per fallbacks entry (default: [llm] fallbacks).

    Fallbacks share [llm]'s timeout, retries, stall limit and cool-down; `temperature`
    None means [llm] temperature. An entry without api_key sends no key, never the
    primary's: that key belongs to the primary's host alone.
    """
    entries = llm.fallbacks if entries is None else entries
    temp = llm.temperature if temperature is None else temperature
    fallbacks = [
        _endpoint(
            llm,
            entry.base_url,
            entry.api_key,
            entry.model,
            temperature=temp,
            config_key=f"{section} fallbacks[{index}]",
        )
        for index, entry in enumerate(entries)
    ]
    return FallbackProvider(
        [primary, *fallbacks], cooldown_s=llm.cooldown_s, clock=clock, config_key=section
    )


def _endpoint(
    llm: LlmSettings,
    base_url: str,
    api_key: _Secret | None,
    model: str,
    *,
    temperature: float,
    config_key: str = "[llm]",
) -> OpenAIProvider:
    """One endpoint with [llm]'s timeout, retries and stall limit: the primary and every
    fallback share them."""
    return OpenAIProvider(
        base_url=base_url,
        api_key=_plain(api_key),
        model=model,
        timeout_s=llm.timeout_s,
        max_retries=llm.max_retries,
        temperature=temperature,
        stream_stall_s=llm.stream_stall_s,
        config_key=config_key,
    )


def _plain(secret: _Secret | None) -> str | None:
    return secret.get_secret_value() if secret is not None else None
