"""The model seam: a small Provider protocol and its OpenAI-compatible implementation.

Why the official SDK with a `base_url`: one client path reaches OpenAI, Gemini's and
DeepSeek's compatible endpoints, Ollama, vLLM and llama.cpp servers (the embedded
model too), with the SDK's own timeouts and retries. Every failure becomes an
`LLMError` with a coarse `kind` the processor can answer on, and a message that is safe
to log: it never carries the API key or the server's raw error text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

import aiohttp
import openai
from openai.types.chat import ChatCompletion

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Local servers (llama.cpp, Ollama, vLLM) ignore the key, but the SDK insists on one.
NO_KEY_PLACEHOLDER = "sk-no-key-required"

LLMErrorKind = Literal["timeout", "unavailable", "rate_limited", "bad_request", "auth"]


@dataclass(frozen=True)
class ChatResult:
    """One completion: the text, why it stopped, and the tokens it cost (None if unknown)."""

    text: str
    model: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI shape


class LLMError(Exception):
    """A failed model call. `kind` drives the user's apology; str(exc) is for the log."""

    def __init__(self, kind: LLMErrorKind, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: LLMErrorKind = kind
        self.status = status


@runtime_checkable
class LLMProvider(Protocol):
    """What the processor and tool loop need from a model."""

    model: str

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResult: ...

    async def close(self) -> None: ...


class OpenAIProvider:
    """Chat completions on any OpenAI-compatible endpoint through `openai.AsyncOpenAI`.

    `timeout_s` bounds each HTTP attempt; the SDK retries timeouts, connection errors,
    408/409/429 and 5xx up to `max_retries` times with its own backoff (honouring
    Retry-After), so the worst case is about (max_retries + 1) * timeout_s plus backoff.

    Two choices for throughput (measured on 2 cores, FakeOpenAI in-process, 41-message
    contexts): the SDK's aiohttp transport instead of its default httpx pool (whose
    per-request pool scan made 1,000 concurrent calls 2-4x slower), and `client.post`
    on /chat/completions instead of `chat.completions.create`, which re-walks every
    message through its TypedDict transformer (~20 ms CPU per call, 47 calls/s; with
    `post`, 278). `post` is the SDK's documented way to send a body as-is, with the same
    auth, retries, timeouts, error classes and typed `ChatCompletion` parsing; our
    messages are already plain JSON, so the transform had nothing to do.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = 0.7,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self._temperature = temperature
        self._where = _safe_host(base_url)
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY_PLACEHOLDER,
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=openai.DefaultAioHttpClient(timeout=timeout_s),
        )

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> ChatResult:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        temp = self._temperature if temperature is None else temperature
        if temp is not None:
            params["temperature"] = temp
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if tools:
            params["tools"] = tools
        try:
            completion = await self._client.post(
                "/chat/completions", body=params, cast_to=ChatCompletion
            )
        except openai.OpenAIError as exc:
            error = self._map_error(exc)
            log.debug("model call failed: %s %s", error.kind, error)
            raise error from None
        except (ValueError, OSError, aiohttp.ClientError) as exc:
            # The transport's own refusals (e.g. user:password@ in base_url): still ours
            # to phrase, and still an LLMError so the caller's apology path runs.
            error = LLMError(
                "bad_request",
                f"the model call to {self._where} could not be "
                f"sent ({type(exc).__name__}); check [llm] base_url",
            )
            log.debug("model call failed: %s %s", error.kind, error)
            raise error from None
        try:
            return self._result(completion)
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            # 200 with a body that is not a chat completion (a proxy's HTML page, a
            # half-compatible server): the SDK parses leniently, so check here.
            log.debug("malformed completion from %s: %s", self._where, type(exc).__name__)
            raise LLMError(
                "unavailable", f"the model endpoint at {self._where} sent a malformed answer"
            ) from None

    async def close(self) -> None:
        await self._client.close()

    def _result(self, completion: Any) -> ChatResult:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMError("unavailable", f"the model endpoint at {self._where} sent no choices")
        choice = choices[0]
        message = choice.message
        usage = getattr(completion, "usage", None)
        content = message.content
        if content is not None and not isinstance(content, str):
            raise TypeError("content is not text")
        calls = [tc.model_dump(exclude_none=True) for tc in (message.tool_calls or [])]
        result = ChatResult(
            text=content or "",
            model=getattr(completion, "model", None) or self.model,
            finish_reason=choice.finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            tool_calls=calls,
        )
        log.debug(
            "model %s answered: finish=%s prompt_tokens=%s completion_tokens=%s",
            result.model,
            result.finish_reason,
            result.prompt_tokens,
            result.completion_tokens,
        )
        return result

    def _map_error(self, exc: openai.OpenAIError) -> LLMError:
        """SDK exception -> LLMError, built from our own words only (never exc's text)."""
        where = self._where
        tries = f"after {self.max_retries + 1} attempt(s)"
        if isinstance(exc, openai.APIConnectionError) and _refused_or_dropped(exc):
            # The aiohttp transport reports some connection failures as timeouts.
            return LLMError(
                "unavailable",
                f"could not reach the model endpoint at {where}: connection "
                f"refused or closed ({tries})",
            )
        if isinstance(exc, openai.APITimeoutError):
            return LLMError(
                "timeout",
                f"the model endpoint at {where} did not answer within "
                f"{self.timeout_s:g}s ({tries})",
            )
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(
                "unavailable", f"could not reach the model endpoint at {where} ({tries})"
            )
        if isinstance(exc, openai.APIStatusError):
            return _status_error(exc.status_code, where, tries, self.model)
        if isinstance(exc, openai.APIResponseValidationError):
            return LLMError("unavailable", f"the model endpoint at {where} sent a malformed answer")
        return LLMError("unavailable", f"the model call to {where} failed ({type(exc).__name__})")


def _refused_or_dropped(exc: BaseException) -> bool:
    """Whether the root cause is a refused or closed connection, not a slow server."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    found = False
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, TimeoutError):
            return False
        if isinstance(cause, aiohttp.ClientConnectionError | ConnectionError):
            found = True
        cause = cause.__cause__ or cause.__context__
    return found


def _status_error(status: int, where: str, tries: str, model: str) -> LLMError:
    if status == 429:
        return LLMError(
            "rate_limited",
            f"the model endpoint at {where} is rate limiting us (429, {tries})",
            status=status,
        )
    if status in (401, 403):
        return LLMError(
            "auth",
            f"the model endpoint at {where} refused the API key ({status}); check [llm] api_key",
            status=status,
        )
    if status == 404:
        return LLMError(
            "bad_request",
            f"the model endpoint at {where} answered 404: check "
            f"[llm] base_url and that model {model!r} exists",
            status=status,
        )
    if status >= 500 or status in (408, 409):
        return LLMError(
            "unavailable",
            f"the model endpoint at {where} failed with HTTP {status} ({tries})",
            status=status,
        )
    return LLMError(
        "bad_request",
        f"the model endpoint at {where} rejected the request (HTTP {status})",
        status=status,
    )


def _safe_host(base_url: str) -> str:
    """host[:port] of the endpoint, without any user:password@, path or query."""
    try:
        parts = urlsplit(base_url)
        host = parts.hostname or "?"
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "?"


class _Secret(Protocol):
    def get_secret_value(self) -> str: ...


class LlmSettings(Protocol):
    """The [llm] keys this module reads (bot.config.LlmConfig; core does not import bot)."""

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


def provider_from_config(
    llm: LlmSettings,
    base_url_override: str | None = None,
    model_override: str | None = None,
) -> OpenAIProvider:
    """Build the provider from [llm]; the overrides point it at the embedded model."""
    api_key = llm.api_key.get_secret_value() if llm.api_key is not None else None
    return OpenAIProvider(
        base_url=base_url_override or llm.base_url or OPENAI_BASE_URL,
        api_key=api_key,
        model=model_override or llm.model,
        timeout_s=llm.timeout_s,
        max_retries=llm.max_retries,
        temperature=llm.temperature,
    )
