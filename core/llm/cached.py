"""How many prompt tokens the provider served from its prompt cache, as it reports them.

Why a function of its own: providers spell it differently. OpenAI (and Gemini's, vLLM's
and llama.cpp's OpenAI-compatible servers that report it) put it in
`usage.prompt_tokens_details.cached_tokens`; DeepSeek reports `prompt_cache_hit_tokens`
beside `prompt_tokens`. Both the plain and the streamed answer read it here, so usage
rows get one number whatever the endpoint.
"""

from __future__ import annotations

from typing import Any


def cached_prompt_tokens(usage: Any) -> int | None:
    """Cached prompt tokens in an OpenAI SDK `usage` object (or dict); None if not said."""
    if usage is None:
        return None
    details = _get(usage, "prompt_tokens_details")
    found = _whole(_get(details, "cached_tokens")) if details is not None else None
    if found is None:
        found = _whole(_get(usage, "prompt_cache_hit_tokens"))
    return found


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:  # the SDK keeps fields it does not know in `model_extra`
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return value


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
