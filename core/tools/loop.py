"""The tool loop: ask the model, run the tools it asks for, feed results back, repeat.

Only the model's own reply is scanned for markers, so a marker typed by a user or
found on a web page is never executed. Handlers run concurrently, each under a
timeout; a failing handler becomes an error observation. After `max_rounds` tool
rounds the model is told to answer without tools, and whatever it then writes is the
answer (markers stripped; nothing left means an honest "I couldn't find that").

Every turn it produced comes back as a TurnDraft for the processor to store; a draft
reads as a chat message exactly as its stored turn will (`turn_message`, one rule for
both).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from core.context.history_views import turn_message
from core.llm import ChatResult, LLMProvider
from core.outside import outside_text
from core.streaming import PreviewSink
from core.text.escaping import escape_attr
from core.tools.native import call_parts, native_arg
from core.tools.preview import streamed_round
from core.tools.registry import Observation, ToolCall, ToolContext, ToolRegistry
from core.tools.source import ToolSource
from core.usage.meter import ModelCall, UsageMeter, UsageSubject
from memory.turns.types import Role, TurnKind

log = logging.getLogger(__name__)

Mode = Literal["markers", "native"]

GIVE_UP_REPLY = (
    "Sorry, I couldn't find that. I tried to look it up but did not get a usable answer."
)
LAST_ROUND_NOTE = (
    "That was the last tool round. Answer the user now with what you have, without "
    "writing any tool markers or calling tools; if you could not find the answer, say so."
)
NEXT_ROUND_NOTE = (
    "Use these results to answer the user's message, or write another marker if you "
    "really need more."
)


@dataclass(frozen=True)
class TurnDraft:
    """A turn the loop produced, before it is stored: what the processor stores as is."""

    role: Role
    kind: TurnKind
    content: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, result: ChatResult) -> Usage:
        return Usage(
            self.prompt_tokens + (result.prompt_tokens or 0),
            self.completion_tokens + (result.completion_tokens or 0),
            self.calls + 1,
        )


@dataclass(frozen=True)
class LoopResult:
    reply: str  # what the user sees: markers stripped, never empty
    turns: list[TurnDraft]  # the tool turns, in order (the final reply is not among them)
    usage: Usage
    rounds: int  # tool rounds that ran
    model: str = ""
    finish_reason: str | None = None
    gave_up: bool = False  # the reply is the fallback, not the model's words
    out_of_rounds: bool = False  # every round was used: the reply was asked for without tools

    def drafts(self) -> list[TurnDraft]:
        """Every turn to store after the user's: the tool turns, then the reply."""
        return [*self.turns, TurnDraft("assistant", "message", self.reply)]


@dataclass(frozen=True)
class RoundHooks:
    """A caller's say in a run (a background task): `rounds` overrides the
    loop's max_rounds, `after_round` is awaited with each round's turns and the usage so
    far (a checkpoint), and `enough` ends the rounds early when it returns True (a budget).
    """

    rounds: int | None = None
    after_round: Callable[[list[TurnDraft], Usage], Awaitable[None]] | None = None
    enough: Callable[[Usage], bool] | None = None


@dataclass
class _Pending:
    call: ToolCall
    error: str | None = None  # set when the call is refused before it runs


class ToolLoop:
    """Runs one turn's model calls and tool rounds; LLMError propagates to the caller."""

    def __init__(
        self,
        registry: ToolRegistry,
        llm: LLMProvider,
        *,
        max_rounds: int = 3,
        handler_timeout_s: float = 15.0,
        mode: Mode = "markers",
        max_tokens: int | None = None,
        temperature: float | None = None,
        max_calls_per_round: int = 4,
        give_up_reply: str = GIVE_UP_REPLY,
        meter: UsageMeter | None = None,
        source: ToolSource | None = None,
    ) -> None:
        if max_rounds < 0 or handler_timeout_s <= 0 or max_calls_per_round < 1:
            raise ValueError("max_rounds >= 0, handler_timeout_s > 0, max_calls_per_round >= 1")
        if mode not in ("markers", "native"):
            raise ValueError(f"unknown tool mode {mode!r}")
        self._registry = registry
        self._llm = llm
        self._max_rounds = max_rounds
        self._timeout_s = handler_timeout_s
        self._mode: Mode = mode
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._max_calls = max_calls_per_round
        self._give_up = give_up_reply
        self._meter = meter  # every model call of a turn is counted for its sender
        self._source = source  # tools offered per sender (MCP servers), if any

    def defuse_markers(self, text: str) -> str:
        """Outside text with this loop's tool markers made inert (core/outside.py)."""
        return self._registry.defuse_markers(text)

    def guide(self) -> str:
        """The tool guide for the system prompt, matching this loop's mode."""
        return self._registry.guide(native=self._mode == "native")

    def turn_tools(self, ctx: ToolContext) -> dict[str, Any]:
        """This sender's tool material for the context (TurnInput's tool_guide,
        tool_tokens, tools_dropped): definitions sent as functions count in the budget."""
        native = self._mode == "native"
        out: dict[str, Any] = {"tool_guide": self.guide_for(ctx)}
        if self._source is not None:
            offer = self._source.offer(ctx, native=native)
            out["tool_tokens"] = offer.tokens if native else 0  # markers: in the guide
            out["tools_dropped"] = offer.dropped
        return out

    def guide_for(self, ctx: ToolContext) -> str:
        """The tool guide for this sender: only the source's tools they may use."""
        native = self._mode == "native"
        mine = self._registry.not_offered(ctx)  # tools kept for some senders (`draw`)
        if self._source is None:
            return self._registry.guide(native=native, hide=mine)
        offer = self._source.offer(ctx, native=native)
        hidden = mine if offer.names else mine | {"mcp_call"}
        return self._registry.guide(
            native=native, extra=offer.guide_lines(native=native), hide=hidden
        )

    async def run(
        self,
        messages: list[dict[str, Any]],
        ctx: ToolContext,
        preview: PreviewSink | None = None,
        hooks: RoundHooks | None = None,
    ) -> LoopResult:
        """Answer `messages`; with `preview`, every model call streams and the preview is
        given the visible text as it grows (never a marker), and a status line while a
        tool runs. Each answered call is metered, also when a later one fails."""
        calls: list[ModelCall] = []
        try:
            return await self._run(messages, ctx, preview, calls, hooks or RoundHooks())
        finally:
            if self._meter is not None:
                who = UsageSubject(ctx.platform, ctx.chat_id, ctx.user_id)
                await self._meter.record(who, calls, "reply")

    async def _run(
        self,
        messages: list[dict[str, Any]],
        ctx: ToolContext,
        preview: PreviewSink | None,
        calls: list[ModelCall],
        hooks: RoundHooks,
    ) -> LoopResult:
        convo = list(messages)
        cap = self._max_rounds if hooks.rounds is None else max(0, hooks.rounds)
        produced: list[TurnDraft] = []
        seen: dict[tuple[str, str], Observation] = {}
        usage = Usage()
        rounds = 0
        status = ""
        offered: list[dict[str, Any]] = []
        if self._source is not None and self._mode == "native":
            offered = self._source.offer(ctx, native=True).functions()
        native = self._mode == "native" and (bool(self._registry) or bool(offered))
        while True:
            # Native: keep offering the tools on the final call so the request stays valid
            # for servers that insist on it; the note and the loop bound do the stopping.
            tools = (
                self._registry.openai_tools(self._registry.not_offered(ctx)) + offered
                if native
                else None
            )
            result = await self._ask(convo, tools, preview, status)
            usage = usage.add(result)
            calls.append(ModelCall(result, list(convo)))
            pending = self._requests(result) if rounds < cap else []
            if not pending:
                return self._finish(result, produced, usage, rounds, out=rounds >= cap > 0)
            rounds += 1
            if preview is not None:
                status = self._registry.status_line(p.call for p in pending if p.error is None)
                if status:
                    await preview(status)
            observations = await self._execute(pending, ctx, seen)
            if rounds < cap and hooks.enough is not None and hooks.enough(usage):
                cap = rounds  # the caller's budget is spent: this round is the last
            last = rounds >= cap
            turns = self._round_turns(result, pending, observations, last=last)
            produced.extend(turns)
            if hooks.after_round is not None:
                await hooks.after_round(turns, usage)
            convo.extend(turn_message(turn.role, turn.content, turn.meta) for turn in turns)

    async def _ask(
        self,
        convo: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        preview: PreviewSink | None,
        status: str,
    ) -> ChatResult:
        if preview is None:
            return await self._llm.chat(
                convo, max_tokens=self._max_tokens, temperature=self._temperature, tools=tools
            )
        return await streamed_round(
            self._llm,
            self._registry,
            convo,
            preview,
            status=status,
            max_tokens=self._max_tokens,
            temperature=self._temperature,
            tools=tools,
        )

    def _finish(
        self,
        result: ChatResult,
        produced: list[TurnDraft],
        usage: Usage,
        rounds: int,
        *,
        out: bool = False,
    ) -> LoopResult:
        reply = self._registry.strip_markers(result.text or "")
        gave_up = not reply
        if gave_up:
            log.info("model gave no usable answer after %d tool round(s)", rounds)
        return LoopResult(
            reply=reply or self._give_up,
            turns=produced,
            usage=usage,
            rounds=rounds,
            model=result.model,
            finish_reason=result.finish_reason,
            gave_up=gave_up,
            out_of_rounds=out,
        )

    # -- finding requests -------------------------------------------------------------

    def _requests(self, result: ChatResult) -> list[_Pending]:
        if self._mode == "native":
            return self._native_requests(result)
        calls = self._registry.find_calls(result.text or "")
        pending = [_Pending(c) for c in calls[: self._max_calls]]
        if len(calls) > self._max_calls:
            log.info("model asked for %d tools in one round; ran %d", len(calls), self._max_calls)
        return pending

    def _native_requests(self, result: ChatResult) -> list[_Pending]:
        pending: list[_Pending] = []
        for index, raw in enumerate(result.tool_calls or []):
            call_id, name, arguments = call_parts(raw)
            call_id = call_id or f"call_{index}"
            call = ToolCall(tool=name, arg="", call_id=call_id, raw=arguments)
            tool = self._registry.get(name)
            if index >= self._max_calls:
                pending.append(_Pending(call, "Not run: too many tool calls in one round."))
                continue
            if tool is None and self._source is not None and self._source.owns(name):
                source_call = ToolCall(name, arguments, raw=arguments, call_id=call_id)
                pending.append(_Pending(source_call))  # the source checks permission, args
                continue
            if tool is None:
                pending.append(_Pending(call, f"There is no tool named {name!r}."))
                continue
            arg, error = native_arg(arguments, tool)
            pending.append(_Pending(ToolCall(name, arg, raw=arguments, call_id=call_id), error))
        return pending

    # -- running ----------------------------------------------------------------------

    async def _execute(
        self,
        pending: list[_Pending],
        ctx: ToolContext,
        seen: dict[tuple[str, str], Observation],
    ) -> list[tuple[Observation, bool]]:
        """One observation per request (and whether it was reused), same order."""
        tasks: dict[tuple[str, str], asyncio.Task[Observation]] = {}
        keys: list[tuple[str, str] | None] = []
        for item in pending:
            if item.error is not None:
                keys.append(None)
                continue
            key = (item.call.tool, item.call.arg.casefold())
            keys.append(key)
            if key not in seen and key not in tasks:
                tasks[key] = asyncio.create_task(self._run_one(item.call, ctx))
        if tasks:
            await asyncio.gather(*tasks.values())
        out: list[tuple[Observation, bool]] = []
        claimed: set[tuple[str, str]] = set()
        for item, slot in zip(pending, keys, strict=True):
            if slot is None:
                out.append((Observation(item.error or "Not run.", ok=False), False))
            elif slot in seen:
                out.append((seen[slot], True))
            else:
                out.append((tasks[slot].result(), slot in claimed))
                claimed.add(slot)
        for done, task in tasks.items():
            seen[done] = task.result()
        return out

    async def _run_one(self, call: ToolCall, ctx: ToolContext) -> Observation:
        if self._source is not None and self._source.owns(call.tool):
            return await self._source.run(call, ctx)  # bounded by its own timeouts
        tool = self._registry.get(call.tool)
        if tool is None:
            return Observation(f"There is no tool named {call.tool!r}.", ok=False)
        if not tool.offered(ctx):  # written anyway (a guess, an old turn, an injection)
            log.info("tool %s refused: not offered to %s", call.tool, ctx.sender_key)
            return Observation(f"Not run: the {call.tool} tool is not available here.", ok=False)
        timeout_s = tool.timeout_s or self._timeout_s
        try:
            return await asyncio.wait_for(tool.handler(call.arg, ctx), timeout_s)
        except TimeoutError:
            log.warning("tool %s timed out after %gs", call.tool, timeout_s)
            return Observation(
                f"The {call.tool} tool did not answer within {timeout_s:g} s.", ok=False
            )
        except Exception:
            log.exception("tool %s failed", call.tool)
            return Observation(f"The {call.tool} tool failed with an internal error.", ok=False)

    # -- turns ------------------------------------------------------------------------

    def _round_turns(
        self,
        result: ChatResult,
        pending: list[_Pending],
        observations: list[tuple[Observation, bool]],
        *,
        last: bool,
    ) -> list[TurnDraft]:
        note = LAST_ROUND_NOTE if last else NEXT_ROUND_NOTE
        frames = [
            self._frame(item.call, obs) if item.error is None else _refused(item, obs)
            for item, (obs, _) in zip(pending, observations, strict=True)
        ]
        summary = [
            {"tool": item.call.tool, "arg": item.call.arg, "ok": obs.ok, "reused": reused}
            for item, (obs, reused) in zip(pending, observations, strict=True)
        ]
        if self._mode == "native":
            tool_calls = [
                {
                    "id": item.call.call_id,
                    "type": "function",
                    "function": {"name": item.call.tool, "arguments": item.call.raw or "{}"},
                }
                for item in pending
            ]
            turns = [
                TurnDraft("assistant", "tool_call", result.text or "", {"tool_calls": tool_calls})
            ]
            for index, (item, frame) in enumerate(zip(pending, frames, strict=True)):
                content = frame if index < len(frames) - 1 else f"{frame}\n\n{note}"
                meta = {"tool_call_id": item.call.call_id, "name": item.call.tool, **summary[index]}
                turns.append(TurnDraft("tool", "tool_result", content, meta))
            return turns
        body = "\n\n".join([*frames, note])
        return [
            TurnDraft("assistant", "tool_call", result.text or "", {"calls": summary}),
            TurnDraft("user", "tool_result", body, {"results": summary}),
        ]

    def _frame(self, call: ToolCall, observation: Observation) -> str:
        if self._source is not None and self._source.owns(call.tool):
            return self._source.frame(call, observation, self._registry.defuse_markers)
        return self._registry.frame(call, observation)


def _refused(item: _Pending, observation: Observation) -> str:
    return (
        f'<tool_error tool="{escape_attr(item.call.tool)}">'
        f"{outside_text(observation.text)}</tool_error>"
    )
