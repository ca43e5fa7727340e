"""FakeOpenAI's streamed answers: OpenAI's chat.completion.chunk format as Server-Sent Events.

A stream is a role chunk, the text's pieces, each tool call's fragments keyed by index
(id, type and name first, then the JSON arguments in pieces), a finish chunk, the usage
chunk (no choices) when the request's `stream_options.include_usage` asks for it, and
`data: [DONE]`. `StreamShape` cuts and paces it, and can stall or drop it mid-way.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class StreamShape:
    """How a streamed answer is cut into chunks and paced.

    Pieces are the text's pieces and then the tool-call fragments; `stall_after` and
    `drop_after` count them (0: right after the role chunk, before any text).
    """

    piece_chars: int = 0  # 0: one piece per word (with its trailing whitespace)
    delay_s: float = 0.0  # before each piece
    stall_after: int | None = None  # send this many pieces, then nothing until close
    drop_after: int | None = None  # send this many pieces, then close the connection
    send_usage: bool = True  # False: a server that never reports usage in a stream


@dataclass(frozen=True)
class StreamedAnswer:
    """What to stream, already decided by the server (text, calls, finish, usage)."""

    chunk_base: dict[str, Any]  # id, object, created, model, system_fingerprint
    text: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str
    usage: tuple[int, int]  # prompt, completion
    include_usage: bool
    usage_extra: dict[str, Any] = field(default_factory=dict)  # e.g. cached-token details


async def write_stream(
    request: web.Request,
    answer: StreamedAnswer,
    shape: StreamShape,
    *,
    pause: Callable[[float], Awaitable[None]],
    closing: asyncio.Event,
) -> web.StreamResponse:
    """Serve `answer` as SSE; `pause` waits between pieces, `closing` ends a stall."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    with_usage = answer.include_usage and shape.send_usage

    async def send(choices: list[dict[str, Any]], usage: Any = None) -> None:
        chunk = {**answer.chunk_base, "choices": choices}
        if with_usage:
            chunk["usage"] = usage
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

    await send(_choice({"role": "assistant", "content": ""}))
    deltas = stream_deltas(answer.text, answer.tool_calls, shape.piece_chars)
    for sent, delta in enumerate(deltas):
        if shape.stall_after == sent:
            await closing.wait()
            return response
        if shape.drop_after == sent:
            if request.transport is not None:
                request.transport.close()
            return response
        if shape.delay_s:
            await pause(shape.delay_s)
        await send(_choice(delta))
    await send(_choice({}, answer.finish_reason))
    if with_usage:
        prompt, completion = answer.usage
        total = prompt + completion
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
        usage.update(answer.usage_extra)
        await send([], usage)
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def stream_deltas(
    text: str | None, tool_calls: list[dict[str, Any]] | None, piece_chars: int
) -> list[dict[str, Any]]:
    """The streamed deltas: text pieces, then each tool call's fragments."""
    text = text or ""
    if piece_chars > 0:
        pieces = [text[i : i + piece_chars] for i in range(0, len(text), piece_chars)]
    else:
        pieces = re.findall(r"\S+\s*|\s+", text)
    deltas: list[dict[str, Any]] = [{"content": piece} for piece in pieces]
    arg_chars = piece_chars or 8
    for index, call in enumerate(tool_calls or []):
        function = call["function"]
        head = {"index": index, "id": call.get("id"), "type": "function"}
        deltas.append(
            {"tool_calls": [{**head, "function": {"name": function["name"], "arguments": ""}}]}
        )
        args = function["arguments"]
        for i in range(0, len(args), arg_chars):
            fragment = {"index": index, "function": {"arguments": args[i : i + arg_chars]}}
            deltas.append({"tool_calls": [fragment]})
    return deltas


def _choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
