"""FakeOpenAI: an OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

Why a server and not a mock: the code under test goes through the real `openai` SDK,
real HTTP, real retries and real timeouts, so the tests catch wire-format and error
mapping mistakes a mock of our own functions would hide.

Usage::

    async with FakeOpenAI(reply="hi") as fake:          # default reply for every request
        provider = OpenAIProvider(fake.base_url, "sk-test", "fake-model", ...)
        fake.reply("first")                              # one-shot behaviours, FIFO
        fake.fail(500, times=2)                          # two 500s (the SDK retries them)
        fake.fail(429, retry_after_ms=5)                 # rate limit with a short retry hint
        fake.reply_tool_calls([{"name": "search", "arguments": {"q": "x"}}])
        fake.delay(2.0)                                  # next answer after 2 s
        fake.hang()                                      # next request never answers
        fake.drop()                                      # next request: connection closed
        ...
        fake.requests[0]["messages"]                     # recorded JSON bodies
        fake.requests[0].headers["authorization"]        # ... and their headers
        await fake.wait_for_requests(3)                  # event-based, no sleeps

The default reply is a string or a callable `(request_json) -> str | FakeReply` (sync
or async); `echo_last_user` is a ready-made one. `latency_s` delays every answer (load
tests: 1,000 chats in flight against a 1 s model). `pause()`/`resume()` hold every
request at the door, and `in_flight` counts requests being served, for concurrency tests.
`record=False` keeps only `total_requests` (long benchmarks). `send_usage=False` is a
server that never reports `usage` (neither in answers nor in streams).

Embeddings: `/v1/embeddings` answers `hashed_vector(text)` per input (floats, or base64
float32 as the SDK asks by default), records bodies in `embedding_requests`, and answers
500 to the next `embedding_fails` requests; `embedding_latency_s` holds each answer.

Prompt caching: `cache="openai"` reports `usage.prompt_tokens_details.cached_tokens`,
`cache="deepseek"` `prompt_cache_hit_tokens`/`prompt_cache_miss_tokens`, both computed
like a provider's prefix cache: the (approximate) tokens of the longest byte-identical
prefix this request's messages share with the previous request's.

Streaming: a request with `"stream": true` gets the same scripted answer as Server-Sent
Events in OpenAI's chunk format (tests/fakes/openai_stream.py). `fail`, `hang` and
`drop` act before the stream opens, as a real server's errors would; `StreamShape`
cuts and paces the stream itself::

    fake.stream_shape = StreamShape(delay_s=0.01)        # every stream: 10 ms per chunk
    fake.reply("one two three", stream=StreamShape(stall_after=2))  # then silence
    fake.reply("one two three", stream=StreamShape(drop_after=0))   # headers, then cut

Also runnable as a stand-in model server process:
`python -m tests.fakes.openai_server --host 127.0.0.1 --port 8000 [--reply TEXT] [--latency S]
[--stream-delay S]` (streams pace each piece by S seconds; unknown llama.cpp-style options
are ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import inspect
import itertools
import json
import math
import os
import re
import signal
import struct
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.files import make_png
from tests.fakes.openai_stream import StreamedAnswer, StreamShape, write_stream

DEFAULT_MODEL = "fake-model"
DEFAULT_REPLY = "This is a reply from the fake model."

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


@dataclass(frozen=True)
class FakeReply:
    """One scripted answer. Token counts default to a word-count approximation."""

    text: str | None = DEFAULT_REPLY
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server saw it; `req["messages"]` reads the JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None
    at: float = field(default_factory=time.monotonic)

    def __getitem__(self, key: str) -> Any:
        return (self.json or {})[key]

    def get(self, key: str, default: Any = None) -> Any:
        return (self.json or {}).get(key, default)


ReplyFn = Callable[[dict[str, Any]], "str | FakeReply | Awaitable[str | FakeReply]"]


@dataclass(frozen=True)
class _Answer:
    reply: FakeReply | None  # None: use the default strategy
    delay_s: float = 0.0
    stream: StreamShape | None = None  # None: the server's stream_shape


@dataclass(frozen=True)
class _Fail:
    status: int
    message: str
    headers: dict[str, str]


@dataclass(frozen=True)
class _Cut:
    hang: bool  # True: answer nothing until the server closes; then (or at once) drop


_Behaviour = _Answer | _Fail | _Cut


def echo_last_user(request_json: dict[str, Any]) -> str:
    """A default strategy: answer with the text of the last user message."""
    text = last_user_text(request_json)
    return "echo: " + (text if text is not None else "(nothing)")


def last_user_text(request_json: dict[str, Any]) -> str | None:
    """The text of the request's last user message (None when there is none)."""
    for message in reversed(request_json.get("messages", [])):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return None


def content_text(content: Any) -> str:
    """A message's text, whether its content is a string or multimodal parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _approx_tokens(text: str) -> int:
    return len(text.split())


EMBEDDING_DIM = 64


def hashed_vector(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A deterministic stand-in for an embedding: Latin words and CJK character bigrams
    hashed into `dim` buckets, unit length. Shared words make close vectors."""
    lowered = text.casefold()
    terms = re.findall(r"[a-z0-9]+", lowered)
    cjk = re.findall(r"[\u4e00-\u9fff]+", lowered)
    terms += [run[i : i + 2] for run in cjk for i in range(max(len(run) - 1, 1))]
    vector = [0.0] * dim
    for term in terms:
        digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class FakeOpenAI:
    """An aiohttp server speaking OpenAI's chat.completions wire format; see module doc."""

    def __init__(
        self,
        reply: str | FakeReply | ReplyFn = DEFAULT_REPLY,
        *,
        model: str = DEFAULT_MODEL,
        latency_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        stream_shape: StreamShape | None = None,
        send_usage: bool = True,
        cache: str | None = None,
    ) -> None:
        if cache not in (None, "openai", "deepseek"):
            raise ValueError(f"cache must be None, 'openai' or 'deepseek', not {cache!r}")
        self.cache = cache  # how cached prompt tokens are reported (None: not at all)
        self._last_prompt = ""  # the previous request's messages, for the prefix cache
        self._default = reply
        self.send_usage = send_usage  # False: a server that never reports `usage`
        self.stream_shape = stream_shape or StreamShape()
        self.model = model
        self.latency_s = latency_s
        self._host = host
        self._port = port
        self.record = record  # False: count only (long benchmarks)
        self.requests: list[RecordedRequest] = []
        self.total_requests = 0
        self.in_flight = 0
        self._script: deque[_Behaviour] = deque()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._open_gate = asyncio.Event()
        self._open_gate.set()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.port = 0
        # Audio: transcripts by the exact bytes sent (else `transcript`), speech answers.
        self.transcript = "hello from a voice note"
        self.transcripts: dict[bytes, str] = {}
        self.transcriptions: list[dict[str, Any]] = []  # model, filename, bytes, mime
        self.speech_audio = b"OggS\x00\x02" + b"\x00" * 64  # an OGG-looking body
        self.speech_requests: list[dict[str, Any]] = []
        self.audio_fails = 0  # the next N audio requests answer 500
        # Pictures (`/v1/images/generations`): the PNG every request draws, how long it
        # takes, and whether the provider refuses it (content policy, HTTP 400).
        self.image_png = make_png(4, 4)
        self.image_latency_s = 0.0
        self.image_refuse = False
        self.image_url: str | None = None  # answer a URL to this picture instead of b64_json
        self.image_requests: list[dict[str, Any]] = []  # the JSON bodies, in order
        self.images_answered = 0  # pictures handed out (what a real provider bills)
        # Embeddings: hashed bag-of-terms vectors (texts sharing words point the same way).
        self.embedding_requests: list[dict[str, Any]] = []
        self.embedding_fails = 0  # the next N embeddings requests answer 500
        self.embedding_dim = EMBEDDING_DIM
        self.embedding_latency_s = 0.0  # each embeddings answer waits this long (a kill test)

    # -- lifecycle -------------------------------------------------------------------
    async def __aenter__(self) -> FakeOpenAI:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speech)
        app.router.add_post("/v1/images/generations", self._images)
        app.router.add_get("/files/picture.png", self._picture)  # what `image_url` names
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, backlog=4096)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def close(self) -> None:
        """Stop serving; hung or paused requests are released and their connections dropped."""
        self._closing.set()
        self._open_gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    # -- scripting ---------------------------------------------------------------------
    def set_default(self, reply: str | FakeReply | ReplyFn) -> None:
        """Change the answer given when no one-shot behaviour is queued."""
        self._default = reply

    def reply(
        self,
        text: str,
        *,
        finish_reason: str = "stop",
        usage: tuple[int, int] | None = None,
        stream: StreamShape | None = None,
    ) -> None:
        """Queue one answer with this text (usage = (prompt_tokens, completion_tokens));
        `stream` shapes it when the request streams."""
        p, c = usage if usage else (None, None)
        self._script.append(_Answer(FakeReply(text, None, finish_reason, p, c), stream=stream))

    def reply_tool_calls(
        self,
        calls: list[dict[str, Any]],
        text: str | None = None,
        *,
        stream: StreamShape | None = None,
    ) -> None:
        """Queue one answer asking for tool calls.

        Each call is `{"name": ..., "arguments": dict | str}` (an id is made up) or a full
        OpenAI tool-call dict `{"id", "type": "function", "function": {...}}`.
        """
        reply = FakeReply(text, [_tool_call(c) for c in calls], "tool_calls")
        self._script.append(_Answer(reply, stream=stream))

    def fail(
        self,
        status: int,
        message: str = "fake failure",
        *,
        times: int = 1,
        retry_after: float | None = None,
        retry_after_ms: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue `times` error answers in OpenAI's error JSON shape.

        `retry_after`/`retry_after_ms` set the headers the SDK honours between retries;
        keep them small in tests (the SDK's own backoff starts at 0.5 s).
        """
        hdrs = dict(headers or {})
        if retry_after is not None:
            hdrs["retry-after"] = str(retry_after)
        if retry_after_ms is not None:
            hdrs["retry-after-ms"] = str(retry_after_ms)
        for _ in range(times):
            self._script.append(_Fail(status, message, hdrs))

    def delay(self, seconds: float, reply: str | FakeReply | None = None) -> None:
        """Queue one answer given after `seconds` (the default reply unless one is given)."""
        fr = FakeReply(reply) if isinstance(reply, str) else reply
        self._script.append(_Answer(fr, seconds))

    def hang(self, times: int = 1) -> None:
        """Queue requests that never answer (until the server closes): client timeouts."""
        self._script.extend(_Cut(hang=True) for _ in range(times))

    def drop(self, times: int = 1) -> None:
        """Queue requests whose connection is closed without any response."""
        self._script.extend(_Cut(hang=False) for _ in range(times))

    def pause(self) -> None:
        """Hold every request (after recording it) until `resume()`."""
        self._open_gate.clear()

    def resume(self) -> None:
        self._open_gate.set()

    @property
    def pending_script(self) -> int:
        """How many one-shot behaviours are still queued."""
        return len(self._script)

    async def wait_for_requests(self, count: int, timeout_s: float = 5.0) -> None:
        """Wait until at least `count` chat requests arrived (ever); TimeoutError otherwise."""
        if self.total_requests >= count:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((count, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        finally:
            self._waiters = [(n, f) for n, f in self._waiters if f is not fut]

    # -- handlers ----------------------------------------------------------------------
    async def _transcribe(self, request: web.Request) -> web.Response:
        """`/v1/audio/transcriptions` (multipart): records the file, answers its transcript."""
        form = await request.post()
        upload = form.get("file")
        data = upload.file.read() if hasattr(upload, "file") else b""
        self.transcriptions.append(
            {
                "model": form.get("model"),
                "filename": getattr(upload, "filename", None),
                "mime": getattr(upload, "content_type", None),
                "bytes": data,
            }
        )
        if self.audio_fails:
            self.audio_fails -= 1
            return _error(500, "transcription failed")
        return web.json_response({"text": self.transcripts.get(data, self.transcript)})

    async def _speech(self, request: web.Request) -> web.Response:
        """`/v1/audio/speech`: records the request, answers `speech_audio`."""
        body = await request.json()
        self.speech_requests.append(body)
        if self.audio_fails:
            self.audio_fails -= 1
            return _error(500, "speech failed")
        return web.Response(body=self.speech_audio, content_type="audio/ogg")

    async def _images(self, request: web.Request) -> web.Response:
        """`/v1/images/generations`: records the request, then (after `image_latency_s`)
        the picture as b64_json (or `image_url`), or a content-policy refusal."""
        body = await request.json()
        self.image_requests.append(body)
        if self.image_latency_s:
            await self._sleep(self.image_latency_s)
        if self.image_refuse:
            payload = {
                "error": {
                    "message": "Your request was rejected by our safety system.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "content_policy_violation",
                }
            }
            return web.json_response(payload, status=400)
        self.images_answered += 1
        item = (
            {"url": self.image_url}
            if self.image_url
            else {"b64_json": base64.b64encode(self.image_png).decode("ascii")}
        )
        usage = {"input_tokens": 12, "output_tokens": 272, "total_tokens": 284}
        return web.json_response({"created": 0, "data": [item], "usage": usage})

    async def _picture(self, request: web.Request) -> web.Response:
        return web.Response(body=self.image_png, content_type="image/png")

    @property
    def picture_url(self) -> str:
        """Where this server serves `image_png` (set `image_url` to it: a URL answer)."""
        return f"http://{self._host}:{self.port}/files/picture.png"

    async def _embeddings(self, request: web.Request) -> web.Response:
        """`/v1/embeddings`: records the body; answers one hashed vector per input, as
        floats or as base64 float32 (what the openai SDK asks for by default)."""
        body = await request.json()
        self.embedding_requests.append(body)
        if self.embedding_latency_s:
            await self._sleep(self.embedding_latency_s)
        if self.embedding_fails:
            self.embedding_fails -= 1
            return _error(500, "embeddings failed")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = []
        for index, text in enumerate(texts):
            vector = hashed_vector(str(text), self.embedding_dim)
            if body.get("encoding_format") == "base64":
                packed = struct.pack(f"<{len(vector)}f", *vector)
                value: Any = base64.b64encode(packed).decode("ascii")
            else:
                value = vector
            data.append({"object": "embedding", "index": index, "embedding": value})
        tokens = sum(_approx_tokens(str(t)) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "model": body.get("model"),
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}],
            }
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        self._record(RecordedRequest(request.method, request.path, headers, body))
        self.in_flight += 1
        try:
            return await self._serve(request, body)
        finally:
            self.in_flight -= 1

    async def _serve(self, request: web.Request, body: Any) -> web.StreamResponse:
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            return _error(400, "'model' and 'messages' are required properties.")
        await self._open_gate.wait()
        if self.latency_s:
            await self._sleep(self.latency_s)
        behaviour = self._script.popleft() if self._script else _Answer(None)
        if isinstance(behaviour, _Fail):
            return _error(behaviour.status, behaviour.message, behaviour.headers)
        if isinstance(behaviour, _Cut):
            if behaviour.hang:
                await self._closing.wait()
            if request.transport is not None:
                request.transport.close()
            return web.Response()  # never written: the transport is gone
        if behaviour.delay_s:
            await self._sleep(behaviour.delay_s)
        reply = behaviour.reply or await self._default_reply(body)
        if body.get("stream"):
            shape = behaviour.stream or self.stream_shape
            return await self._stream(request, body, reply, shape)
        return web.json_response(self._completion(body, reply))

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: FakeReply, shape: StreamShape
    ) -> web.StreamResponse:
        options = body.get("stream_options") or {}
        answer = StreamedAnswer(
            chunk_base={
                "id": f"chatcmpl-fake{next(self._ids)}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", self.model),
                "system_fingerprint": "fp_fake",
            },
            text=reply.text,
            tool_calls=reply.tool_calls,
            finish_reason=_finish(reply),
            usage=_usage(body, reply),
            include_usage=bool(options.get("include_usage")) and self.send_usage,
            usage_extra=self._cache_usage(body, _usage(body, reply)[0]),
        )
        return await write_stream(request, answer, shape, pause=self._sleep, closing=self._closing)

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._closing.wait(), seconds)
        except TimeoutError:
            pass

    def _record(self, rec: RecordedRequest) -> None:
        if self.record:
            self.requests.append(rec)
        self.total_requests += 1
        for count, fut in self._waiters:
            if self.total_requests >= count and not fut.done():
                fut.set_result(None)

    async def _default_reply(self, body: dict[str, Any]) -> FakeReply:
        strategy = self._default
        if callable(strategy):
            result = strategy(body)
            if inspect.isawaitable(result):
                result = await result
        else:
            result = strategy
        return FakeReply(result) if isinstance(result, str) else result

    def _completion(self, body: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
        prompt, completion = _usage(body, reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        completion_json = {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _finish(reply),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        completion_json["usage"].update(self._cache_usage(body, prompt))
        if not self.send_usage:
            del completion_json["usage"]
        return completion_json

    def _cache_usage(self, body: dict[str, Any], prompt: int) -> dict[str, Any]:
        """The cache fields of `usage`: tokens of the prefix shared with the last request."""
        if self.cache is None:
            return {}
        text = json.dumps(body.get("messages", []), ensure_ascii=False, sort_keys=True)
        last, self._last_prompt = self._last_prompt, text
        shared = len(os.path.commonprefix([last, text]))
        cached = min(prompt, _approx_tokens(text[:shared]) if shared else 0)
        if self.cache == "deepseek":
            return {"prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": prompt - cached}
        return {"prompt_tokens_details": {"cached_tokens": cached}}


def _finish(reply: FakeReply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(body: dict[str, Any], reply: FakeReply) -> tuple[int, int]:
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = sum(
            4 + _approx_tokens(content_text(m.get("content")))
            for m in body.get("messages", [])
            if isinstance(m, dict)
        )
    completion = reply.completion_tokens
    if completion is None:
        completion = _approx_tokens(reply.text or "") + sum(
            _approx_tokens(tc["function"]["arguments"]) for tc in reply.tool_calls or []
        )
    return prompt, completion


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    if "function" in call:
        return {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", **call}
    args = call.get("arguments", {})
    return {
        "id": call.get("id", f"call_{uuid.uuid4().hex[:12]}"),
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    etype, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "api_error", None))
    payload = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return web.json_response(payload, status=status, headers=headers)


# -- stand-in server process --------------------------------------------------------------
async def _serve_forever(args: argparse.Namespace) -> None:
    if args.startup_delay:
        await asyncio.sleep(args.startup_delay)  # a model that takes long to load
    model = args.model_alias or DEFAULT_MODEL
    async with FakeOpenAI(
        args.reply,
        model=model,
        host=args.host,
        port=args.port,
        latency_s=args.latency,
        record=False,  # a long-running stand-in must not grow without bound
        stream_shape=StreamShape(delay_s=args.stream_delay),
    ):
        print(f"fake model server listening on {args.host}:{args.port}", flush=True)
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run FakeOpenAI as a process.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--reply", default=DEFAULT_REPLY)
    parser.add_argument("--model_alias", default=None)
    parser.add_argument("--startup-delay", type=float, default=0.0)
    parser.add_argument("--latency", type=float, default=0.0, help="delay every answer (s)")
    parser.add_argument("--stream-delay", type=float, default=0.0, help="per streamed chunk (s)")
    parser.add_argument("--ignore-sigterm", action="store_true")
    args, _unknown = parser.parse_known_args(argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
