"""One OpenAI-compatible endpoint, reached through the official SDK.

Why the official SDK with a `base_url`: one client path reaches OpenAI, Gemini's and
DeepSeek's compatible endpoints, Ollama, vLLM and llama.cpp servers (the embedded
model too), with the SDK's own timeouts and retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any, Unpack

import aiohttp
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from core.llm.cached import cached_prompt_tokens
from core.llm.errors import LLMError, Site, map_sdk_error, safe_host, unsendable
from core.llm.provider import ChatOptions, ChatResult, StreamDone, StreamEvent, TextDelta
from core.llm.streaming import StreamAssembler, StreamStalled, next_within

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
# Local servers (llama.cpp, Ollama, vLLM) ignore the key, but the SDK insists on one.
NO_KEY_PLACEHOLDER = "sk-no-key-required"


class _Interrupted(Exception):
    """A stream broke after it opened: worth another attempt if nothing was shown yet."""

    def __init__(self, error: LLMError) -> None:
        super().__init__(str(error))
        self.error = error


class OpenAIProvider:
    """Chat completions on any OpenAI-compatible endpoint through `openai.AsyncOpenAI`.

    `timeout_s` bounds each HTTP attempt; the SDK retries timeouts, connection errors,
    408/409/429 and 5xx up to `max_retries` times with its own backoff (honouring
    Retry-After), so the worst case is about (max_retries + 1) * timeout_s plus backoff.

    Two choices for throughput: the SDK's aiohttp transport instead of its default httpx
    pool (which scans the pool on every request, slow under many concurrent calls), and
    `client.post` on /chat/completions instead of `chat.completions.create`, whose
    TypedDict transformer re-walks every message although ours are already plain JSON.
    `post` is the SDK's documented way to send a body as-is, with the same auth, retries,
    timeouts, error classes and typed `ChatCompletion` parsing; streaming uses it with
    `stream=True` and the SDK's `AsyncStream` of chunks.

    Streaming: the SDK retries opening the stream as it retries `chat`. A stream that
    breaks or stalls for `stream_stall_s` after it opened is opened again (up to
    `max_retries` more times) only while no text has been yielded; afterwards the
    failure is raised, so the consumer never sees text twice.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = 0.7,
        *,
        stream_stall_s: float = 30.0,
        retry_backoff_s: float = 0.5,
        config_key: str = "[llm]",
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.endpoint = safe_host(base_url)
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.stream_stall_s = stream_stall_s
        self._retry_backoff_s = retry_backoff_s
        self._temperature = temperature
        self._site = Site(
            where=self.endpoint,
            model=model,
            timeout_s=timeout_s,
            max_retries=max_retries,
            config_key=config_key,  # where the operator fixes it, named in errors
        )
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY_PLACEHOLDER,
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=openai.DefaultAioHttpClient(timeout=timeout_s),
        )

    async def chat(
        self, messages: list[dict[str, Any]], **options: Unpack[ChatOptions]
    ) -> ChatResult:
        params = self._params(messages, options)
        try:
            completion = await self._client.post(
                "/chat/completions", body=params, cast_to=ChatCompletion
            )
        except openai.OpenAIError as exc:
            raise self._failed(self._map_error(exc)) from None
        except (ValueError, OSError, aiohttp.ClientError) as exc:
            raise self._failed(unsendable(self._site, exc)) from None
        try:
            result = self._result(completion)
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            # 200 with a body that is not a chat completion (a proxy's HTML page, a
            # half-compatible server): the SDK parses leniently, so check here.
            log.debug("malformed completion from %s: %s", self.endpoint, type(exc).__name__)
            raise self._malformed("answer") from None
        self._log_answer("answered", result)
        return result

    async def stream_chat(
        self, messages: list[dict[str, Any]], **options: Unpack[ChatOptions]
    ) -> AsyncGenerator[StreamEvent, None]:
        """TextDelta* then one StreamDone (see the class doc for retries)."""
        params = self._params(messages, options)
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
        attempt = 0
        while True:
            assembler = StreamAssembler(model=self.model, endpoint=self.endpoint)
            shown = False
            try:
                async with aclosing(self._stream_once(params, assembler)) as pieces:
                    async for piece in pieces:
                        shown = True
                        yield TextDelta(piece)
                break
            except _Interrupted as broken:
                if shown or attempt >= self.max_retries:
                    raise self._failed(broken.error) from None
                attempt += 1
                log.debug(
                    "stream from %s broke before any text; attempt %d", self.endpoint, attempt
                )
                await asyncio.sleep(self._retry_backoff_s * 2 ** (attempt - 1))
        if assembler.chunks == 0:  # e.g. a server that ignored stream=true
            raise self._failed(self._malformed("stream (no chunks)"))
        result = assembler.result()
        self._log_answer("streamed", result)
        yield StreamDone(result)

    async def close(self) -> None:
        await self._client.close()

    # -- one streamed attempt --------------------------------------------------------------

    async def _stream_once(
        self, params: dict[str, Any], assembler: StreamAssembler
    ) -> AsyncGenerator[str, None]:
        """Open the stream (SDK retries apply) and yield its non-empty text pieces."""
        try:
            stream = await self._client.post(
                "/chat/completions",
                body=params,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
        except openai.OpenAIError as exc:
            raise self._failed(self._map_error(exc)) from None
        except (ValueError, OSError, aiohttp.ClientError) as exc:
            raise self._failed(unsendable(self._site, exc)) from None
        try:
            chunks: AsyncIterator[ChatCompletionChunk] = aiter(stream)
            while True:
                chunk = await self._next_chunk(chunks)
                if chunk is None:
                    return
                try:
                    piece = assembler.add(chunk)
                except (AttributeError, TypeError, ValueError) as exc:
                    log.debug("malformed chunk from %s: %s", self.endpoint, type(exc).__name__)
                    raise self._failed(self._malformed("stream")) from None
                if piece:
                    yield piece
        finally:
            await stream.close()

    async def _next_chunk(self, chunks: AsyncIterator[ChatCompletionChunk]) -> Any:
        """The next chunk, None at the end; stalls and broken connections -> _Interrupted."""
        try:
            return await next_within(chunks, self.stream_stall_s)
        except StopAsyncIteration:
            return None
        except StreamStalled:
            raise _Interrupted(self._stalled(self.stream_stall_s)) from None
        except openai.APIConnectionError as exc:  # APITimeoutError too: the socket read limit
            if self._map_error(exc).kind == "timeout":
                raise _Interrupted(self._stalled(self.timeout_s)) from None
            raise _Interrupted(
                LLMError(
                    "unavailable",
                    f"the stream from the model endpoint at {self.endpoint} broke off",
                )
            ) from None
        except openai.OpenAIError as exc:  # an error event inside the stream
            raise self._failed(self._map_error(exc)) from None

    # -- shared ---------------------------------------------------------------------------

    def _params(self, messages: list[dict[str, Any]], options: ChatOptions) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        temperature = options.get("temperature")
        temp = self._temperature if temperature is None else temperature
        if temp is not None:
            params["temperature"] = temp
        max_tokens = options.get("max_tokens")
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        tools = options.get("tools")
        if tools:
            params["tools"] = tools
        return params

    def _result(self, completion: Any) -> ChatResult:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMError("unavailable", f"the model endpoint at {self.endpoint} sent no choices")
        choice = choices[0]
        message = choice.message
        usage = getattr(completion, "usage", None)
        content = message.content
        if content is not None and not isinstance(content, str):
            raise TypeError("content is not text")
        calls = [tc.model_dump(exclude_none=True) for tc in (message.tool_calls or [])]
        return ChatResult(
            text=content or "",
            model=getattr(completion, "model", None) or self.model,
            finish_reason=choice.finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            tool_calls=calls,
            endpoint=self.endpoint,
            cached_tokens=cached_prompt_tokens(usage),
        )

    def _map_error(self, exc: openai.OpenAIError) -> LLMError:
        return map_sdk_error(exc, self._site)

    def _stalled(self, seconds: float) -> LLMError:
        return LLMError(
            "timeout",
            f"the model endpoint at {self.endpoint} sent nothing for {seconds:g}s mid-stream",
        )

    def _malformed(self, what: str) -> LLMError:
        return LLMError(
            "unavailable", f"the model endpoint at {self.endpoint} sent a malformed {what}"
        )

    def _failed(self, error: LLMError) -> LLMError:
        log.debug("model call failed: %s %s", error.kind, error)
        return error

    def _log_answer(self, how: str, result: ChatResult) -> None:
        log.debug(
            "model %s %s: finish=%s prompt_tokens=%s completion_tokens=%s",
            result.model,
            how,
            result.finish_reason,
            result.prompt_tokens,
            result.completion_tokens,
        )
