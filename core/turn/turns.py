"""The turns a message makes: the user's and the bot's, each with its tokens counted once.

A stored turn keeps its token count so no later context build re-tokenizes it; the
processor, the burst merger and the job runner share this.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.messages import InboundMessage
from core.text.tokens import TokenCounter
from core.tools.loop import TurnDraft
from memory.turns.types import NewTurn, Role, TurnKind


class TurnFactory:
    """Builds NewTurns in a message's chat, counted with `counter`."""

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter

    def user(
        self,
        message: InboundMessage,
        content: str,
        kind: TurnKind,
        meta: dict[str, Any] | None = None,
    ) -> NewTurn:
        """The sender's turn: who said it, its platform id and when."""
        return replace(
            self._turn(message, "user", kind, content, meta or {}),
            sender_id=message.sender_id,
            sender_name=message.sender_name,
            platform_message_id=message.message_id,
            created_at=message.timestamp,
            chat_title=message.chat_title,
        )

    def bot(self, message: InboundMessage, draft: TurnDraft) -> NewTurn:
        """A turn the tool loop wrote (the reply, a tool call, an observation)."""
        return self._turn(message, draft.role, draft.kind, draft.content, dict(draft.meta))

    def _turn(
        self,
        message: InboundMessage,
        role: Role,
        kind: TurnKind,
        content: str,
        meta: dict[str, Any],
    ) -> NewTurn:
        return NewTurn(
            platform=message.platform,
            chat_id=message.chat_id,
            chat_type=message.chat_type.value,
            role=role,
            kind=kind,
            content=content,
            token_count=self._counter.count(content),
            meta=meta,
        )
