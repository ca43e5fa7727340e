"""Speaking up unasked in a group: one small model call that may choose silence.

Why beside the processor: a chime-in is no accepted message. Nobody waits for it, so
nothing is written to the intake and a crash loses only the thought. It shares the
chat's history, persona line, usage counters and the one door out with a turn, and what
it said is stored as the bot's turn so the next reply knows it.

The output contract is strict: the model answers exactly `[silent]`, or with the one short
message it would post. Anything else that looks like silence (empty, `[silent]` anywhere)
is silence; a message is cut to `max_chars` and sent as one message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.llm import LLMError
from core.llm.provider import LLMProvider
from core.messages import DeliveryError, InboundMessage, OutboundMessage
from core.text.tokens import TokenCounter
from core.turn.chime import ChimeLevel, ChimeWindows
from core.usage.meter import UNATTRIBUTED, ModelCall, UsageMeter, UsageSubject
from memory.turns.types import NewTurn, Turn

log = logging.getLogger(__name__)

SILENT = "[silent]"
CHIME_META = "chime"  # a stored bot turn's meta key: this was a chime-in, not a reply


class ChimeStore(Protocol):
    async def recent_turns(
        self, platform: str, chat_id: str, limit: int, before_id: int | None = None
    ) -> list[Turn]: ...

    async def add_turn(self, turn: NewTurn) -> Turn | None: ...


class ProactiveDoor(Protocol):
    async def send_proactive(self, outbound: OutboundMessage) -> Any: ...


class GroupRules(Protocol):
    """What the group's own settings say about speaking up: its allowance and its persona."""

    async def over_quota(self, message: InboundMessage) -> bool:
        """True when the group (or everyone) has used up its `[limits]` allowance."""
        ...

    async def persona(self, message: InboundMessage) -> str:
        """The group's `/bot persona` line, or ""."""
        ...


@dataclass(frozen=True)
class ChimeSeams:
    """What a chime-in shares with the turn path (the App's own pieces, handed over as
    one): the stored turns, the chat model, the one door out, the counter and the meter."""

    store: ChimeStore
    model: LLMProvider
    door: ProactiveDoor
    counter: TokenCounter
    meter: UsageMeter | None = None


@dataclass(frozen=True)
class ChimeOptions:
    bot_name: str = "chatterd"
    history_turns: int = 30  # the recent turns the decision reads at least
    max_turns: int = 120  # ... and at most: the whole batch since the last decision if it fits
    max_chars: int = 400  # a chime-in is one short message
    reply_tokens: int = 200  # what the decision call may write


def instruction(bot_name: str, persona: str, batch: int) -> str:
    """The decision call's system prompt: who the bot is, and the output contract."""
    text = (
        f"You are {bot_name}, a member of this group chat. Nobody asked you anything: "
        f"the last {batch} message(s) were people talking among themselves. Most of the "
        "time you stay quiet. Speak up only when you have something clearly useful to add "
        "(a question nobody answered, a fact you know, someone talking about you).\n"
        f"Answer with exactly {SILENT} to stay quiet, or with the one short message you "
        "would post (a sentence or two, no preamble). Never both."
    )
    if persona.strip():
        text += f"\nIn this chat the operator asks you to follow this persona:\n{persona.strip()}"
    return text


def chime_text(answer: str, max_chars: int) -> str:
    """The message to post, or "" when the model chose silence."""
    text = answer.strip()
    if not text or SILENT in text.casefold():
        return ""
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text


class ChimeIn:
    """Decides, within the windows' budget, whether to speak up; posts at most one message."""

    def __init__(
        self,
        *,
        windows: ChimeWindows,
        seams: ChimeSeams,
        rules: GroupRules | None = None,
        options: ChimeOptions | None = None,
    ) -> None:
        self.windows = windows
        self._seams = seams
        self._rules = rules
        self._options = options or ChimeOptions()

    async def heard(self, message: InboundMessage, level: ChimeLevel) -> bool:
        """An unaddressed group message was stored as context; True when the bot spoke.
        Logs one debug line per message saying what became of it (tests wait for it)."""
        outcome = await self._consider(message, level)
        log.debug("chime-in in %s: %s", message.chat_key, outcome)
        return outcome == "spoke"

    async def _consider(self, message: InboundMessage, level: ChimeLevel) -> str:
        batch = self.windows.heard(message.chat_key, level)
        if not batch:
            return "no decision due"
        if self._rules is not None and await self._rules.over_quota(message):
            return "over the [limits] allowance"
        options = self._options
        limit = min(max(options.history_turns, batch + 10), options.max_turns)
        turns = await self._seams.store.recent_turns(message.platform, message.chat_id, limit)
        if not turns or turns[-1].role != "user":
            return "the bot spoke last"  # never right after the bot's own message
        text = await self._decide(message, turns, batch)
        if not text:
            return "silent"
        latest = await self._seams.store.recent_turns(message.platform, message.chat_id, 1)
        if latest and latest[-1].role != "user":
            return "the bot spoke meanwhile"  # never two of its messages in a row
        try:
            await self._seams.door.send_proactive(
                OutboundMessage(message.platform, message.chat_id, text)
            )
        except DeliveryError as exc:
            log.warning("chime-in in %s not delivered: %s", message.chat_key, exc)
            return "not delivered"
        self.windows.spoke(message.chat_key)
        await self._seams.store.add_turn(self._turn(message, text))
        log.info("chimed in to %s after %d unaddressed message(s)", message.chat_key, batch)
        return "spoke"

    async def _decide(self, message: InboundMessage, turns: Sequence[Turn], batch: int) -> str:
        persona = await self._rules.persona(message) if self._rules else ""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": instruction(self._options.bot_name, persona, batch)}
        ]
        messages += [
            {"role": t.role, "content": t.content}
            for t in turns
            if t.role in ("user", "assistant") and t.kind in ("message", "context")
        ]
        try:
            result = await self._seams.model.chat(messages, max_tokens=self._options.reply_tokens)
        except LLMError as exc:
            log.warning("chime-in decision failed in %s: %s", message.chat_key, exc.kind)
            return ""
        if self._seams.meter is not None:
            who = UsageSubject(message.platform, message.chat_id, UNATTRIBUTED)
            await self._seams.meter.record(who, [ModelCall(result, messages)], "reply")
        return chime_text(result.text or "", self._options.max_chars)

    def _turn(self, message: InboundMessage, text: str) -> NewTurn:
        return NewTurn(
            platform=message.platform,
            chat_id=message.chat_id,
            chat_type=message.chat_type.value,
            role="assistant",
            kind="message",
            content=text,
            token_count=self._seams.counter.count(text),
            meta={CHIME_META: True},
        )
