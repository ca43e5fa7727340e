"""The main path of a triggered message: store, build context, ask the model, store, reply."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from cachetools import LRUCache

from core.context.compaction import Compactor
from core.context.report import ContextReport
from core.context.turn import ChatPersona, KnowledgeLookup, TurnContextBuilder, TurnInput
from core.inject import inject
from core.knowledge.citations import Citations
from core.llm import LLMError
from core.messages import InboundMessage
from core.streaming import ReplyStream
from core.tasks import TaskTracker
from core.text.tokens import TokenCounter
from core.tools.loop import ToolLoop
from core.tools.registry import ToolContext
from core.turn.accepted import intake_draft, reply_for, restored_message
from core.turn.bursts import (
    BurstOptions,
    Bursts,
    in_arrival_order,
    leading_burst,
    sent_order,
)
from core.turn.compacting import BackgroundCompaction
from core.turn.delivery import ChannelRoutes, Outbox
from core.turn.ordering import ChatSerializer, ChatTicket
from core.turn.outcomes import APOLOGY, GENERIC_APOLOGY, Overloaded, ShuttingDown
from core.turn.reactions import reaction_of
from core.turn.reading import (
    ImageReader,
    MessageReading,
    SharedMaterialReader,
    first_images,
)
from core.turn.stored_reply import (
    send_answered_reply,
    send_duplicates_reply,
    send_elsewheres_reply,
)
from core.turn.turns import TurnFactory
from memory.chats.types import ChatKey, person_key
from memory.turns.types import IntakeEntry, NewTurn, Store

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # a message that was started this often without an answer is given up
REPORTS_KEPT = 10_000  # /context reports remembered, most recent chats first
# (message, it was spoken, reply text) -> the reply as audio, or None (core/media/speaking.py).
Speaker = Callable[[InboundMessage, bool, str], Awaitable[bytes | None]]


@dataclass(frozen=True)
class ProcessorOptions:
    history_limit: int = 200
    max_in_flight: int = 64
    max_waiting: int = 1024  # turns waiting beyond max_in_flight before work is turned away
    max_in_flight_per_user: int = 8  # one sender's turns across chats (a hung model)
    message_suffix: str = ""  # appended to every user message, e.g. a tool-access note
    burst: BurstOptions = BurstOptions()  # quick messages of one sender as one turn (off)


class MessageProcessor:
    """Handles triggered messages: per-chat order, dedupe, storage, model, reply.

    Why one class: the guarantees (the message durable in the intake before any slow
    step; the user turn, the tool turns, the reply and the intake state stored in one
    transaction after the model; one answer per message) only hold if one place owns them.
    """

    def __init__(
        self,
        *,
        store: Store,
        context: TurnContextBuilder,
        counter: TokenCounter,
        tool_loop: ToolLoop,
        outbox: Outbox,
        options: ProcessorOptions | None = None,
        read_images: ImageReader | None = None,
        compactor: Compactor | None = None,
        routes: ChannelRoutes | None = None,
        chat_persona: ChatPersona | None = None,
        read_shared: SharedMaterialReader | None = None,
        speak: Speaker | None = None,
        knowledge: KnowledgeLookup | None = None,
    ) -> None:
        """`outbox` is the one door out, shared with everyone who sends; `routes` gives
        a recovered message its images back. `knowledge`: the chat's and global
        documents' passages for a turn, if any."""
        self._store = store
        self._knowledge = knowledge
        self._speak = speak
        self._chat_persona = chat_persona
        self._context = context
        self._counter = counter
        self._options = options or ProcessorOptions()
        self._tool_loop = tool_loop
        self._reading = MessageReading(read_images, read_shared)
        self._routes = routes
        self._outbox = outbox
        self._serial = ChatSerializer(
            self._options.max_in_flight, self._options.max_in_flight_per_user
        )
        self._tasks = TaskTracker()
        self._compaction = BackgroundCompaction(compactor, self._tasks)
        self._turns = TurnFactory(counter)
        self._bursts: Bursts[tuple[IntakeEntry, InboundMessage]] = Bursts()
        self._closing = False
        self._last_reports: LRUCache[ChatKey, ContextReport] = LRUCache(maxsize=REPORTS_KEPT)

    async def handle(
        self, message: InboundMessage, accepted: Callable[[], None] = lambda: None
    ) -> None:
        """Accept one triggered message and answer it through the outbox. `accepted` is
        called once the message is stored and in its burst, before the model is asked,
        and again on the way out (it must be idempotent, as a Ticket's release is).

        A duplicate delivery of a message handled elsewhere is not answered again (a
        retried HTTP request is sent the first try's reply). Raises ShuttingDown during
        a drain: the message is stored and answered after the restart.
        """
        try:
            return await self._handle(message, accepted)
        finally:
            accepted()  # refused, a duplicate, or failed before its burst: the next may go

    async def _handle(self, message: InboundMessage, accepted: Callable[[], None]) -> None:
        if self._overloaded():
            return await self._turn_away(message)
        # arrival order, before any await
        place = self._serial.reserve(message.chat_key, message.sender_key)
        try:
            entry = await self._store.intake.accept(intake_draft(message))
        except BaseException:
            place.release()
            raise
        if entry is None or self._closing:
            place.release()
            if entry is None:
                return await self._duplicate(message)
            raise ShuttingDown
        window = self._burst_window(message)
        if window <= 0:
            accepted()
            return await self._run([(entry, message)], place, late=False)
        chat, sender = message.chat_key, message.sender_key
        longest = self._options.burst.max_s(message.chat_type)
        burst = self._bursts.join(chat, sender, (entry, message), window, longest)
        accepted()
        if burst is None:
            place.release()  # durable, and its burst's leader answers it
            return None
        try:
            async with self._tasks.track():
                items = await self._bursts.collect(chat, sender, burst)
        except BaseException:
            place.release()  # the burst's rows stay pending: recovery answers them
            raise
        # As sent, not as handled: two messages of one poll can reach here swapped.
        items.sort(key=lambda item: sent_order(item[0]))
        return await self._run(items, place, late=False)

    def gathering(self, message: InboundMessage) -> bool:
        """The sender has a burst open in this chat that a message of theirs may join."""
        if self._closing or self._burst_window(message) <= 0:
            return False
        return self._bursts.gathering(message.chat_key, message.sender_key)

    async def join_burst(self, message: InboundMessage) -> bool:
        """A group message that does not call the bot, from a sender whose burst (started
        by one that did) is still gathering: accepted and answered with that burst, True.
        False, with nothing stored, when the sender has no burst open here."""
        if not self.gathering(message):
            return False

        async def arrive() -> tuple[IntakeEntry, InboundMessage] | None:
            entry = await self._store.intake.accept(intake_draft(message))
            return None if entry is None else (entry, message)

        return await self._bursts.join_late(message.chat_key, message.sender_key, arrive)

    def _burst_window(self, message: InboundMessage) -> float:
        """How long this message waits for its sender's next one (0: answered alone).
        Only where the reply is pushed (an HTTP caller waits for its own answer) and
        messages can come while one is answered (not the console)."""
        if message.scheduled or message.message_id is None:
            return 0.0
        if not self._outbox.merges_bursts(message.platform):
            return 0.0
        return self._options.burst.window_s(message.chat_type)

    def _overloaded(self) -> bool:
        return self._serial.places >= self._options.max_in_flight + self._options.max_waiting

    async def _turn_away(self, message: InboundMessage) -> None:
        """Overload, decided before anything is stored or started: a caller that can send
        again (HTTP) is told to (Overloaded, nothing stored); a message a platform will not
        send again is stored `pending` and left to recovery, which answers it once there
        is room (here or on another replica). Never half-accepted."""
        if not self._outbox.pushes(message.platform):
            raise Overloaded
        entry = await self._store.intake.accept(intake_draft(message), queued=False)
        if entry is None:
            return await self._duplicate(message)
        log.warning(
            "overloaded (%d turns in flight or waiting): message %s in %s kept for recovery",
            self._serial.places,
            message.message_id,
            message.chat_key,
        )

    def is_busy(self, chat_key: ChatKey) -> bool:
        """Accepted messages of this chat are in flight (or queued) in this process."""
        return self._serial.busy(chat_key)

    async def resume(self, entry: IntakeEntry) -> bool:
        """Recovery: answer a `pending` message a dead process accepted. False: skipped.

        `entry` is a snapshot from the sweep's read; the row is read again under the
        chat lock, so a message answered meanwhile (here or on another replica) is left
        alone before any slow step (image download, vision, the model).
        """
        return await self._resume([entry])

    async def resume_run(self, entries: Sequence[IntakeEntry]) -> int:
        """Recovery: answer the leading pending rows of one sender in one chat that the
        live path would have merged into one burst, as one turn. Returns how many rows
        it finished (0: skipped)."""
        if not entries:
            return 0
        burst = self._options.burst
        merges = self._outbox.merges_bursts(entries[0].platform)
        group = in_arrival_order(leading_burst(entries, burst)) if merges else []
        group = group or list(entries[:1])
        return len(group) if await self._resume(group) else 0

    async def _resume(self, group: Sequence[IntakeEntry]) -> bool:
        entry = group[0]
        if self._closing or self.is_busy(entry.chat_key):
            return False
        # The place (and a slot of max_in_flight) first, the chat's lease second, like
        # every turn: a sweep holding leases while it waits for slots held by turns
        # waiting for those leases would deadlock under overload.
        place = self._serial.reserve(entry.chat_key, person_key(entry.platform, entry.sender_id))
        async with self._tasks.track(), place:
            async with self._store.try_chat_lock(entry.platform, entry.chat_id) as free:
                if not free:
                    return False
                found = [await self._store.intake.get(row.id) for row in group]
                live = [row for row in found if row is not None and row.state == "pending"]
                if not live:
                    return False
                for spent in [row for row in live if row.attempts >= MAX_ATTEMPTS]:
                    log.error(
                        "giving up on message %s in %s: %d attempts died without an answer",
                        spent.platform_message_id,
                        spent.chat_key,
                        spent.attempts,
                    )
                    await self._store.intake.move(spent.id, "failed", expected=["pending"])
                live = [row for row in live if row.attempts < MAX_ATTEMPTS]
                if live:
                    items = [(row, restored_message(row, self._routes)) for row in live]
                    await self._answer_entry(items, late=True)
        return True

    async def redeliver(self, entry: IntakeEntry) -> bool:
        """Recovery: send an `answered` reply that never went out. False: skipped."""
        if self._closing or self.is_busy(entry.chat_key) or not self._outbox.pushes(entry.platform):
            return False
        return await send_answered_reply(self._store, self._outbox, self._routes, entry)

    async def _duplicate(self, message: InboundMessage) -> None:
        await send_duplicates_reply(self._store, self._outbox, message, lambda: self._closing)

    async def _answered_elsewhere(
        self, entry: IntakeEntry, message: InboundMessage, late: bool
    ) -> None:
        if not late:
            closing = lambda: self._closing  # noqa: E731
            await send_elsewheres_reply(self._store, self._outbox, entry, message, closing)

    async def _run(
        self,
        items: list[tuple[IntakeEntry, InboundMessage]],
        place: ChatTicket,
        *,
        late: bool,
    ) -> None:
        message = items[-1][1]
        async with self._tasks.track(), place:
            async with self._store.chat_lock(message.platform, message.chat_id):
                return await self._answer_entry(items, late)

    async def remember_context(self, message: InboundMessage) -> None:
        """Store a group message that did not trigger the bot, so later turns see it."""
        if self._closing:
            return
        async with self._tasks.track(), self._serial.turn(message.chat_key):
            content = inject(message.sender_name, message.sender_id, message.text, [])
            await self._store.add_turn(self._turns.user(message, content, kind="context"))

    def last_report(self, platform: str, chat_id: str) -> ContextReport | None:
        """The context report of the chat's last answered turn (for `/context`)."""
        return self._last_reports.get(ChatKey(platform, chat_id))

    async def shutdown(self, timeout_s: float) -> int:
        """Refuse new turns, finish in-flight ones; returns how many had to be cancelled."""
        self._closing = True
        cancelled = await self._tasks.drain(timeout_s)
        if cancelled:
            log.warning(
                "shutdown: cancelled %d turn(s) still running after %.0fs", cancelled, timeout_s
            )
        return cancelled

    async def _answer_entry(
        self, items: Sequence[tuple[IntakeEntry, InboundMessage]], late: bool
    ) -> None:
        """Under the chat's lock: ask the model, then store the user turns, the tool turns
        and the reply in the transaction that settles the intake rows, and send.

        The messages are already durable in the intake, so the conversation's turns are
        written once, together: two writes per turn (accept, settle).
        A burst (several items) is one model call whose current message holds all of
        them in order; each keeps its own stored user turn, and the last one carries
        the reply (the reply quotes it).
        """
        if late:  # rows answered meanwhile (another replica, or recovery) drop out
            items = [
                (entry, message) for entry, message in items if await self._store.claim(entry.id)
            ]
            if not items:
                return None
        entry, message = items[-1]
        # The suffix (a tool-access note) once, after the last message of a burst.
        suffix = self._options.message_suffix
        firsts = first_images([each for _, each in items])  # images numbered across a burst
        reads = await asyncio.gather(
            *(
                self._reading.read(each, suffix if each is message else "", first)
                for (_, each), first in zip(items, firsts, strict=True)
            )
        )
        user_turns = [
            self._turns.user(each, read.stored, kind="message", meta=read.meta)
            for (_, each), read in zip(items, reads, strict=True)
        ]
        merged = [earlier.id for earlier, _ in items[:-1]]
        content = "\n".join(read.content for read in reads)
        stored = "\n".join(read.stored for read in reads)
        user_turn = user_turns[-1]
        found = await self._store.turn_material(
            message.platform,
            message.chat_id,
            message.sender_id,
            self._options.history_limit,
            None,  # the chat is ours: everything stored so far came before this message
        )
        stream = self._outbox.open_stream(
            entry.id, replace(reply_for(message, "", late=late), resume=entry.delivery or None)
        )
        note = (  # the context's passages [1]..[n]; the turn's tool calls continue from them
            await self._knowledge(message, "\n".join(m.text for _, m in items))
            if self._knowledge is not None
            else None
        )
        # One context for the turn: the tools offered and the calls they run see one sender.
        tools = ToolContext.for_message(
            message, self._store, inbound=message, citations=Citations.after(note)
        )
        built = self._context.build_turn(
            TurnInput(
                message=message,
                user_content=content,
                user_tokens=self._counter.count(content)
                if stored != content or merged
                else user_turn.token_count,
                history=found.history,
                memories=found.memories,
                image_parts=[part for read in reads for part in read.image_parts],
                **self._tool_loop.turn_tools(tools),
                summary=found.summary,
                summary_through=found.summary_through,
                chat_persona=await self._persona(message),
                knowledge=note,
            )
        )
        self._last_reports[message.chat_key] = built.report
        try:
            result = await self._tool_loop.run(
                built.messages, tools, preview=stream.show if stream is not None else None
            )
        except LLMError as exc:
            log.warning("model call failed for %s: %s (%s)", message.chat_key, exc.kind, exc)
            apology = APOLOGY.get(exc.kind, GENERIC_APOLOGY)
            return await self._apologise(entry, message, user_turns, merged, apology, stream)
        turns = [*user_turns, *(self._turns.bot(message, draft) for draft in result.drafts())]
        if not await self._store.settle(entry.id, turns, "answered", merged=merged):
            return await self._answered_elsewhere(entry, message, late)
        # What fell out of this context: the oldest turns of the history it was given.
        if not self._closing:
            dropped = found.history[: built.report.history_dropped]
            self._compaction.after_turn(message, dropped, found.summary)
        outbound = reply_for(message, result.reply, late=late)
        if (emoji := reaction_of(result.reply)) is not None:  # a reaction where it can be
            outbound = replace(outbound, text=emoji, reaction=emoji, react_to=message.message_id)
        elif self._speak is not None and not late:
            outbound = replace(
                outbound,
                audio=await self._speak(message, any(read.spoken for read in reads), result.reply),
            )
        await self._outbox.deliver(entry.id, outbound, stream)
        return None

    async def _apologise(
        self,
        entry: IntakeEntry,
        message: InboundMessage,
        user_turns: list[NewTurn],
        merged: list[int],
        text: str,
        stream: ReplyStream | None,
    ) -> None:
        """A model failure: the user turns are kept, the messages are `failed` (not
        retried later), and the user is told so (in place of any preview already shown)."""
        if not await self._store.settle(entry.id, user_turns, "failed", merged=merged):
            return await self._answered_elsewhere(entry, message, False)
        await self._outbox.tell(reply_for(message, text, late=False), stream)
        return None

    async def settle(self) -> None:
        """Wait for background work (summaries being written) to finish."""
        await self._compaction.idle()

    async def _persona(self, message: InboundMessage) -> str:
        if self._chat_persona is None:
            return ""
        return await self._chat_persona(message.platform, message.chat_id)
