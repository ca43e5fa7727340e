"""The model endpoints the daemon talks to, built from the settings: the chat model (an
endpoint or the embedded llama.cpp), the vision reader's model, and the summariser.

Which endpoint, which key, which fallbacks and when the embedded model starts; the
composition root only keeps the providers open on its exit stack.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack

from bot.config import Settings
from bot.errors import StartupError
from core.context.compaction import CompactionOptions, Compactor
from core.llm import (
    OPENAI_BASE_URL,
    FallbackProvider,
    LLMProvider,
    OpenAIProvider,
    provider_from_config,
    with_fallbacks,
)
from core.media.vision import VisionReader
from core.text.tokens import TokenCounter
from core.usage.meter import UsageMeter
from memory.turns.store import SqlStorage


def uses_endpoint(settings: Settings) -> bool:
    """A configured endpoint; otherwise the embedded model answers."""
    return bool(settings.llm.base_url or settings.llm.api_key)


def check_model_reachable(settings: Settings) -> None:
    """Fail before touching storage when there is no endpoint and no embedded model."""
    if uses_endpoint(settings):
        return
    from bot.wiring.embedded import unavailable_reason

    reason = unavailable_reason(settings.llm.local_model)
    if reason:
        raise StartupError(reason)


async def chat_model(settings: Settings, stack: AsyncExitStack) -> FallbackProvider:
    """The configured endpoint (or the embedded model, started now), then [llm] fallbacks."""
    return with_fallbacks(await _primary(settings, stack), settings.llm)


async def _primary(settings: Settings, stack: AsyncExitStack) -> OpenAIProvider:
    llm = settings.llm
    if uses_endpoint(settings):
        return provider_from_config(llm)
    from bot.wiring.embedded import EmbeddedModel, EmbeddedModelUnavailable

    embedded = EmbeddedModel(llm.local_model, context_window=llm.context_window)
    try:
        base_url = await stack.enter_async_context(embedded)
    except EmbeddedModelUnavailable as exc:
        raise StartupError(str(exc)) from None
    return provider_from_config(llm, base_url_override=base_url, model_override=embedded.model_name)


def vision_model(settings: Settings, stack: AsyncExitStack) -> FallbackProvider | None:
    """The `[vision]` describe model (closed with the stack), or None when it is off."""
    vision, llm = settings.vision, settings.llm
    if not (vision.enabled and vision.mode == "describe"):
        return None
    key = vision.api_key or llm.api_key
    primary = OpenAIProvider(
        base_url=vision.base_url or llm.base_url or OPENAI_BASE_URL,
        api_key=key.get_secret_value() if key else None,
        model=vision.model,
        timeout_s=llm.timeout_s,
        max_retries=llm.max_retries,
        temperature=0.2,
        stream_stall_s=llm.stream_stall_s,
        config_key="[vision]",
    )
    provider = with_fallbacks(
        primary, llm, entries=vision.fallbacks, section="[vision]", temperature=0.2
    )
    stack.push_async_callback(provider.close)
    return provider


def vision_reader(
    settings: Settings,
    provider: FallbackProvider | None,
    meter: UsageMeter,
    defuse: Callable[[str], str] | None = None,
) -> VisionReader:
    """`defuse`: the tool registry's marker defuser, for the words an image shows."""
    return VisionReader(
        provider, settings.vision, timeout_s=settings.llm.timeout_s, meter=meter, defuse=defuse
    )


def compactor(
    settings: Settings,
    llm: LLMProvider,
    storage: SqlStorage,
    counter: TokenCounter,
    meter: UsageMeter,
) -> Compactor | None:
    """The summariser folding history that fell out of the window, or None when off."""
    context, window = settings.context, settings.llm.context_window
    if not context.compaction:
        return None
    summary_tokens = min(400, settings.llm.reply_tokens)
    options = CompactionOptions(
        min_turns=context.compaction_min_turns,
        summary_tokens=summary_tokens,
        input_tokens=max(256, window - summary_tokens - 800),  # 800: instructions, framing
    )
    return Compactor(llm, storage, counter, options, meter)
