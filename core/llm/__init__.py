"""The model seam: a Provider protocol, its OpenAI-compatible implementation, streaming
and fallback across endpoints.

Modules by job: `provider` (the protocol and result/event types), `endpoint` (one
OpenAI-compatible endpoint through the official SDK), `streaming` (chunks folded into
one answer), `fallback` (several endpoints with cool-downs), `errors` (failures in our
own, key-free words), `settings` (building providers from [llm] / [vision]).
"""

from core.llm.endpoint import OPENAI_BASE_URL, OpenAIProvider
from core.llm.errors import LLMError, LLMErrorKind, is_endpoint_fault
from core.llm.fallback import EndpointHealth, FallbackProvider
from core.llm.provider import (
    ChatOptions,
    ChatResult,
    LLMProvider,
    StreamDone,
    StreamEvent,
    TextDelta,
)
from core.llm.settings import EndpointSettings, LlmSettings, provider_from_config, with_fallbacks

__all__ = [
    "OPENAI_BASE_URL",
    "ChatOptions",
    "ChatResult",
    "EndpointHealth",
    "EndpointSettings",
    "FallbackProvider",
    "LLMError",
    "LLMErrorKind",
    "LLMProvider",
    "LlmSettings",
    "OpenAIProvider",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "is_endpoint_fault",
    "provider_from_config",
    "with_fallbacks",
]
