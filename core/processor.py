"""The main path of a triggered message: store, build context, ask the model, store, reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cachetools import LRUCache

from core.context.compaction import Compactor
from core.context.report import ContextReport
from core.context.tokens import TokenCounter
from core.context.turn import TurnContextBuilder, TurnInput
from core.inject import inject
from core.llm import LLMError
from core.media.vision import NOT_DESCRIBED, ImageNotes
from core.messages import InboundMessage
from core.ordering import ChatSerializer, TaskTracker
from core.tools.loop import ToolLoop, TurnDraft
from core.tools.registry import ToolContext
from memory.types import MemoryStore, NewTurn, Turn, TurnKind, TurnMaterial, TurnStore

log = logging.getLogger(__name__)

APOLOGY = {
    "timeout": "Sorry, my language model took too long to answer. Please try again.",
    "rate_limited": "Sorry, I'm getting too many requests right now. Please try again in a minute.",
    "unavailable": "Sorry, I can't reach my language model right now. Please try again shortly.",
}
GENERIC_APOLOGY = "Sorry, something went wrong on my side. Please try again in a moment."
SHUTDOWN_NOTICE = "I'm restarting right now; please send that again in a moment."


class Store(TurnStore, MemoryStore, Protocol):
    """The processor needs both halves of storage, and one read of a turn's material."""

    async def turn_material(
        self, platform: str, chat_id: str, sender_id: str, limit: int, before_id: int
    ) -> TurnMaterial: ...


REPORTS_KEPT = 10_000  # /context reports remembered, most recent chats first
# Turns images into "(Image N: ...)" notes, optional passthrough parts, and content hashes.
ImageReader = Callable[[InboundMessage], Awaitable[ImageNotes]]


@dataclass(frozen=True)
class ProcessorOptions:
    history_limit: int = 200
    max_in_flight: int = 64
    message_suffix: str = ""  # appended to every user message, e.g. a tool-access note


class MessageProcessor:
    """Handles triggered messages: per-chat order, dedupe, storage, model, reply.

    Why one class: the ordering guarantees (user turn stored before the model call, the
    assistant and tool turns stored together after it) only hold if one place owns them.
    """

    def __init__(
        self,
        *,
        store: Store,
        context: TurnContextBuilder,
        counter: TokenCounter,
        tool_loop: ToolLoop,
        options: ProcessorOptions | None = None,
        read_images: ImageReader | None = None,
        compactor: Compactor | None = None,
    ) -> None:
        self._store = store
        self._context = context
        self._counter = counter
        self._options = options or ProcessorOptions()
        self._tool_loop = tool_loop
        self._read_images = read_images
        self._compactor = compactor
        self._background: set[asyncio.Task[None]] = set()
        self._tool_guide = tool_loop.guide()
        self._serial = ChatSerializer(self._options.max_in_flight)
        self._tasks = TaskTracker()
        self._closing = False
        self._last_reports: LRUCache[str, ContextReport] = LRUCache(maxsize=REPORTS_KEPT)

    async def handle(self, message: InboundMessage) -> str | None:
        """Answer one triggered message; None when it is a duplicate delivery."""
        if self._closing:
            return SHUTDOWN_NOTICE
        async with self._tasks.track(), self._serial.turn(message.chat_key):
            async with self._store.chat_lock(message.platform, message.chat_id):
                return await self._handle_in_order(message)

    async def remember_context(self, message: InboundMessage) -> None:
        """Store a group message that did not trigger the bot, so later turns see it."""
        if self._closing:
            return
        async with self._tasks.track(), self._serial.turn(message.chat_key):
            content = inject(message.sender_name, message.sender_id, message.text, [])
            await self._store.add_turn(self._user_turn(message, content, kind="context"))

    def last_report(self, platform: str, chat_id: str) -> ContextReport | None:
        """The context report of the chat's last answered turn (for `/context`)."""
        return self._last_reports.get(f"{platform}:{chat_id}")

    async def shutdown(self, timeout_s: float) -> int:
        """Refuse new turns, finish in-flight ones; returns how many had to be cancelled."""
        self._closing = True
        cancelled = await self._tasks.drain(timeout_s)
        if cancelled:
            log.warning(
                "shutdown: cancelled %d turn(s) still running after %.0fs", cancelled, timeout_s
            )
        return cancelled

    async def _handle_in_order(self, message: InboundMessage) -> str | None:
        images = await self._images(message)
        content = inject(
            message.sender_name,
            message.sender_id,
            message.text,
            images.notes,
            self._options.message_suffix,
        )
        meta = {"images": images.hashes} if images.hashes else {}
        stored = await self._store.add_turn(
            self._user_turn(message, content, kind="message", meta=meta)
        )
        if stored is None:
            log.info(
                "duplicate delivery of %s message %s ignored", message.chat_key, message.message_id
            )
            return None
        found = await self._store.turn_material(
            message.platform,
            message.chat_id,
            message.sender_id,
            self._options.history_limit,
            stored.id,
        )
        built = self._context.build_turn(
            TurnInput(
                message=message,
                user_content=content,
                user_tokens=stored.token_count,
                history=found.history,
                memories=found.memories,
                image_parts=images.parts,
                tool_guide=self._tool_guide,
                summary=found.summary,
                summary_through=found.summary_through,
            )
        )
        self._last_reports[message.chat_key] = built.report
        try:
            result = await self._tool_loop.run(
                built.messages, ToolContext.for_message(message, self._store)
            )
        except LLMError as exc:
            log.warning("model call failed for %s: %s (%s)", message.chat_key, exc.kind, exc)
            return APOLOGY.get(exc.kind, GENERIC_APOLOGY)
        await self._store.add_turns([self._bot_turn(message, d) for d in result.drafts()])
        # What fell out of this context: the oldest turns of the history it was given.
        self._maybe_compact(message, found.history[: built.report.history_dropped], found.summary)
        return result.reply

    async def settle(self) -> None:
        """Wait for background work (summaries being written) to finish."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def _maybe_compact(
        self, message: InboundMessage, dropped: Sequence[Turn], summary: Turn | None
    ) -> None:
        """Fold the turns that fell out of this context into the chat's summary, later."""
        if self._compactor is None or self._closing:
            return
        due = self._compactor.due(message.chat_key, dropped)
        if not due:
            return
        task = asyncio.create_task(self._compact(message, due, summary))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _compact(
        self, message: InboundMessage, due: Sequence[Turn], summary: Turn | None
    ) -> None:
        assert self._compactor is not None
        async with self._tasks.track():
            await self._compactor.fold(message.chat_key, message.chat_type.value, due, summary)

    async def _images(self, message: InboundMessage) -> ImageNotes:
        if not message.images:
            return ImageNotes()
        if self._read_images is None:
            return ImageNotes(notes=[NOT_DESCRIBED] * len(message.images))
        return await self._read_images(message)

    def _user_turn(
        self,
        message: InboundMessage,
        content: str,
        kind: TurnKind,
        meta: dict[str, Any] | None = None,
    ) -> NewTurn:
        return NewTurn(
            platform=message.platform,
            chat_id=message.chat_id,
            chat_type=message.chat_type.value,
            role="user",
            kind=kind,
            content=content,
            token_count=self._counter.count(content),
            sender_id=message.sender_id,
            sender_name=message.sender_name,
            platform_message_id=message.message_id,
            meta=meta or {},
            created_at=message.timestamp,
        )

    def _bot_turn(self, message: InboundMessage, draft: TurnDraft) -> NewTurn:
        return NewTurn(
            platform=message.platform,
            chat_id=message.chat_id,
            chat_type=message.chat_type.value,
            role=draft.role,
            kind=draft.kind,
            content=draft.content,
            token_count=self._counter.count(draft.content),
            meta=dict(draft.meta),
        )
