"""What one turn's context is made of, and the seam to the engine that builds it.

The processor gathers the material and hands it over as a TurnInput; the engine decides
what the model sees and says so in a typed report. A small seam lets `/context` report
exactly what a turn contained.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.context.report import BuiltContext, KnowledgeNote
from core.messages import InboundMessage
from memory.memories.types import MemoryItem
from memory.turns.types import Turn


@dataclass(frozen=True)
class TurnInput:
    message: InboundMessage
    user_content: str  # the injected text: "[name]: text\n(Image 1: ...)"
    user_tokens: int
    history: Sequence[Turn]  # oldest first, after the summary; the current turn not included
    memories: Sequence[MemoryItem]  # the sender's, newest first, nobody else's
    image_parts: Sequence[dict[str, Any]] = ()  # OpenAI image_url parts (passthrough mode)
    tool_guide: str = ""
    summary: Turn | None = None  # the chat's progress summary; `history` starts after it
    summary_through: int = 0  # the id of the last turn `summary` covers
    chat_persona: str = ""  # this chat's own persona line (`/bot persona`), set by an admin
    tool_tokens: int = 0  # function-tool definitions sent with the request (budgeted)
    tools_dropped: tuple[str, ...] = ()  # allowed tools left out of the offer to fit
    knowledge: KnowledgeNote | None = None  # this chat's and the global documents' passages


# (platform, chat_id) -> that chat's persona line, "" for none (the daemon reads
# memory.chats.settings through a short cache); injected into the processor.
ChatPersona = Callable[[str, str], Awaitable[str]]

# (the message, the text to search for) -> passages from its chat's and the global
# documents, None for none; injected into the processor (bot/wiring/knowledge.py).
KnowledgeLookup = Callable[[InboundMessage, str], Awaitable[KnowledgeNote | None]]


class TurnContextBuilder(Protocol):
    def build_turn(self, turn: TurnInput) -> BuiltContext: ...
