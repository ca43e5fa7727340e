"""The one composition root: build every part from the config, start, stop in order.

The daemon, the tests and the benchmarks all build the turn path here (`App.build`), so
the wiring exists once; a test puts its own storage, search backend or image reader in
through `Seams` instead of copying what is below.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aiohttp.abc import AbstractResolver

from bot.commands.admin import BotCommand
from bot.commands.jobs import JobsCommand
from bot.commands.table import Commands
from bot.commands.tools import ToolsCommand
from bot.commands.usage import UsageCommand
from bot.config import Settings
from bot.console.recent import RecentErrors
from bot.errors import channel_start_failure
from bot.wiring.background import build_tasks
from bot.wiring.chime import build_chime
from bot.wiring.console import web_console
from bot.wiring.digest import DaemonDigest, DigestSeams
from bot.wiring.gate import access_rules, admins_of, build_gate
from bot.wiring.images import Drawing, build_drawing
from bot.wiring.jobs import build_job_runner
from bot.wiring.knowledge import DaemonKnowledge, build_knowledge, knowledge_desk
from bot.wiring.mcp_tools import start_mcp_tools
from bot.wiring.models import (
    chat_model,
    check_model_reachable,
    compactor,
    vision_model,
    vision_reader,
)
from bot.wiring.moderation import build_moderation
from bot.wiring.registry import CHANNELS, ChannelDeps, RunMode, default_console_deps
from bot.wiring.reminders import add_commands, add_remind_tool, build_reminders, build_scheduler
from bot.wiring.sandbox import add_sandbox_tool, build_sandbox
from bot.wiring.shared_media import SharedMedia
from bot.wiring.storage import open_daemon_storage
from channels.base import Channel, ChannelHealth
from core.clock import WallClock, utc_now
from core.context import ContextEngine
from core.context.tail import turn_material
from core.jobs.runner import JobRunner
from core.llm import FallbackProvider, LLMProvider
from core.media.vision import VisionReader
from core.reminders.scheduler import Scheduler
from core.reminders.service import Reminders
from core.text.tokens import get_counter
from core.tools.builtin import default_registry
from core.tools.loop import ToolLoop
from core.tools.search import SearchBackend, duckduckgo_backend
from core.turn.bursts import BurstOptions, BurstWindow
from core.turn.chiming import ChimeSeams
from core.turn.delivery import ChannelRoutes, Outbox
from core.turn.gate import Gate
from core.turn.processor import MessageProcessor, ProcessorOptions
from core.turn.reading import ImageReader
from core.turn.recovery import Recovery, RecoveryOptions
from core.usage.meter import UsageMeter, UsageRecorder
from core.usage.quota import QuotaGuard, QuotaLimits
from core.workspace.files import ensure_workspace
from memory.chats.owners import ChatOwners
from memory.chats.settings_cache import CachedChatSettings
from memory.chats.types import ChatKey
from memory.turns.store import SqlStorage

if TYPE_CHECKING:
    from bot.console import Console, ConsoleDeps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Seams:
    """What a test or benchmark puts in place of the part the settings would build (None:
    the real part). The model is no seam: point `[llm] base_url` at a fake server instead."""

    storage: SqlStorage | None = None  # opened by the caller, who also closes it
    search: SearchBackend | None = None  # instead of DuckDuckGo
    read_images: ImageReader | None = None  # instead of the `[vision]` reader
    clock: WallClock | None = None  # UTC wall clock: usage days, quotas, the time block
    links_resolver: AbstractResolver | None = None  # DNS for link fetches (tests map names)


@dataclass(frozen=True)
class TurnPath:
    """Everything between the channels and the database, built and ready."""

    storage: SqlStorage
    processor: MessageProcessor
    commands: Commands
    dispatcher: Gate  # the MessageHandler every channel calls
    recovery: Recovery


class App:
    """Owns the daemon's parts for one run; `async with App(...)` starts and stops them."""

    def __init__(
        self,
        settings: Settings,
        *,
        mode: RunMode = "run",
        deps: ChannelDeps | None = None,
        seams: Seams | None = None,
    ):
        """`seams`: parts a test or benchmark brings (None: all built from `settings`)."""
        self.settings = settings
        self._seams = seams or Seams()
        self._clock = self._seams.clock or utc_now
        self.mode = mode
        self.channels: list[Channel] = []
        self.processor: MessageProcessor | None = None
        self.storage: SqlStorage | None = None
        self.console: Console | None = None  # the web console, when it is served
        self.chat_settings: CachedChatSettings | None = None  # /bot ..., cached; the console
        self._deps = deps
        self._stack = AsyncExitStack()
        self.routes = ChannelRoutes()
        self.outbox: Outbox | None = None  # the one door out, built once for every sender
        self.recovery: Recovery | None = None
        self._recovery_stop = asyncio.Event()
        self._models: dict[str, FallbackProvider] = {}  # "llm", "vision": their endpoints
        self.mcp: Any = None  # core.tools.mcp.tools.McpTools, when [mcp] servers are set
        self.reminders: Reminders | None = None  # /remind, /schedule: sent through the one door
        self.scheduler: Scheduler | None = None
        self.jobs: JobRunner | None = None  # work that outlives a turn (core/jobs/runner.py)
        self._drawing: Drawing | None = None  # pictures ([images]), when enabled
        self.knowledge: DaemonKnowledge | None = None  # [knowledge]: /kb, passages, the tool

    def health(self) -> dict[str, ChannelHealth]:
        return {channel.name: channel.health() for channel in self.channels}

    def model_health(self) -> dict[str, list[dict[str, Any]]]:
        """Each model endpoint's state (FallbackProvider.health), for /healthz."""
        return {name: provider.health() for name, provider in self._models.items()}

    async def extra_health(self) -> dict[str, Any]:
        """The /healthz sections beside the channels: turn states and model endpoints."""
        turns = await self.recovery.health() if self.recovery is not None else None
        extra = {"turns": turns, "models": self.model_health()}
        if self.mcp is not None:
            extra["mcp"] = self.mcp.health()
        return extra

    async def __aenter__(self) -> App:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def build(self) -> TurnPath:
        """The turn path without channels or the recovery loop, for callers that drive the
        processor or dispatcher themselves (tests, benchmarks); `stop()` closes it."""
        try:
            return await self._build()
        except BaseException:
            await self._stack.aclose()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _start(self) -> None:
        await self._start_channels(await self._build())

    async def _build(self) -> TurnPath:
        settings = self.settings
        check_model_reachable(settings)
        ensure_workspace(settings.bot.workspace, settings.bot.name)
        options = ProcessorOptions(
            history_limit=settings.context.history_limit,
            max_in_flight=settings.bot.max_in_flight,
            max_waiting=settings.bot.max_waiting,
            max_in_flight_per_user=settings.bot.max_in_flight_per_user,
            message_suffix=settings.context.message_suffix,
            burst=BurstOptions(
                group=BurstWindow(settings.groups.burst_ms, settings.groups.burst_max_ms),
                private=BurstWindow(settings.private.burst_ms, settings.private.burst_max_ms),
            ),
        )
        if self._seams.storage is not None:
            self.storage = self._seams.storage
        else:
            self.storage = await open_daemon_storage(settings)
            self._stack.push_async_callback(self.storage.close)
        self.chat_settings = chat_settings = CachedChatSettings(self.storage.chat_settings)
        await chat_settings.warm()  # so "typing" is never shown in a denied group
        self.reminders = build_reminders(settings, self.storage, chat_settings, self._clock)
        llm = self._models["llm"] = await chat_model(settings, self._stack)
        self._stack.push_async_callback(llm.close)
        counter = get_counter(settings.context.tokenizer)
        meter = UsageRecorder(self.storage.usage, counter, clock=self._clock)
        self._shared = SharedMedia(
            settings, self._stack, meter, self._seams.links_resolver, counter
        )
        self.knowledge = build_knowledge(
            settings.knowledge,
            self.storage.database,
            self._stack,
            sandbox=self._shared.sandbox,
            pages=self._shared.pages if settings.links.enabled else None,
            max_file_bytes=settings.documents.max_bytes,
        )
        context = ContextEngine(
            settings.bot.workspace,
            max_tokens=settings.llm.context_window,
            token_counter=counter,
            reply_tokens=settings.llm.reply_tokens,
            bot_name=settings.bot.name,
            timezone=settings.bot.timezone,
            turn_material=turn_material(settings),
            clock=self._clock,  # the trusted time block too (a test's clock crosses minutes)
        )
        admins = admins_of(settings, self.routes)  # the one admin decision, for all that ask
        mcp = self.mcp = await start_mcp_tools(settings, self.storage, counter, self._stack, admins)
        jobs, resolver = self.storage.jobs, self._seams.links_resolver
        self._drawing = build_drawing(settings, jobs, self._stack, self._clock, admins, resolver)
        self._tasks = build_tasks(settings, jobs, self.routes, admins)  # spawn
        self._sandbox = await build_sandbox(settings, admins, self._stack, self._shared, self)
        tool_loop = self._tool_loop(llm, meter, mcp)
        outbox = self.outbox = Outbox(self.routes, self.storage.intake)
        self.processor = MessageProcessor(
            store=self.storage,
            context=context,
            counter=counter,
            options=options,
            tool_loop=tool_loop,
            outbox=outbox,
            read_images=self._seams.read_images or self._vision_reader(meter, tool_loop),
            compactor=compactor(settings, llm, self.storage, counter, meter),
            routes=self.routes,
            chat_persona=lambda platform, chat_id: _persona(chat_settings, platform, chat_id),
            read_shared=self._shared.reader,
            speak=self._shared.voice_replies,
            knowledge=self.knowledge.lookup if self.knowledge is not None else None,
        )
        self.recovery = Recovery(
            self.storage.intake,
            self.processor,
            RecoveryOptions(
                interval_s=settings.bot.recovery_interval_s,
                within_s=settings.bot.recover_within_s,
            ),
        )
        limits = QuotaLimits(**settings.limits.model_dump())
        access = access_rules(settings, admins)
        commands = Commands(
            store=self.storage,
            admins=admins,
            bot_name=settings.bot.name,
            context_report=self.processor.last_report,
            bot_control=BotCommand.from_settings(settings, chat_settings, access),
            usage=UsageCommand(
                self.storage.usage,
                admins=admins,
                limits=limits,
                clock=self._clock,
                pictures_per_day=(
                    settings.images.max_per_user_per_day if settings.images.enabled else None
                ),
            ),
            tools=ToolsCommand(mcp),
        )
        self.jobs = build_job_runner(settings, self.storage, outbox, self._clock)
        commands.add("jobs", JobsCommand(jobs, admins, clock=self._clock))
        if self._drawing is not None:  # the "draw" job kind and /draw
            self._drawing.attach(self.jobs, commands, meter)
        if self.knowledge is not None:  # /kb; adds are "kb_add" jobs on the runner
            self.knowledge.attach(
                commands, self.jobs, self.storage, self._shared.sandbox, settings, admins
            )
        self._tasks.attach(self.jobs, tool_loop, self.storage)  # the "task" job kind
        if self.reminders is not None:
            add_commands(commands, self.reminders, admins)
            self.scheduler = build_scheduler(
                settings, self.storage, self.processor, chat_settings, self._clock, outbox, access
            )
        seams = DigestSeams(self.storage, llm, counter, meter, outbox, chat_settings, admins)
        self.digest = DaemonDigest(settings, seams, self._clock, resolver)
        self.digest.attach(commands, self.reminders, self.scheduler)  # /digest, /sub
        quota = QuotaGuard(limits, self.storage.usage, clock=self._clock)
        mod = build_moderation(settings, self.storage, self.routes, outbox, admins, llm, commands)
        dispatcher = build_gate(
            settings,
            processor=self.processor,
            commands=commands,
            outbox=outbox,
            access=access,
            chat_settings=chat_settings,
            quota=quota,
            hear=self._shared.reader.hear if self._shared.speech is not None else None,
            chime=build_chime(
                settings,
                ChimeSeams(self.storage, llm, outbox, counter, meter),
                quota=quota,
                chat_settings=chat_settings,
                clock=self._clock,
            ),
            moderation=mod,
        )
        return TurnPath(self.storage, self.processor, commands, dispatcher, self.recovery)

    async def _start_channels(self, path: TurnPath) -> None:
        settings, dispatcher = self.settings, path.dispatcher
        deps = self._deps or default_console_deps(settings, self.health)
        console = self._console()
        deps = replace(
            deps,
            health_source=self.health,
            extra_health=self.extra_health,
            http_routes=(console.register,) if console is not None else (),
            chat_owner=ChatOwners(path.storage.database).claim,
        )
        for spec in CHANNELS:
            if spec.enabled(settings, self.mode, deps):
                try:
                    channel = spec.create(deps)
                    await channel.start(dispatcher)
                except Exception as exc:
                    raise channel_start_failure(spec.name, exc) from exc
                self._stack.push_async_callback(channel.stop)
                self.channels.append(channel)
                self.routes.add(channel)  # the one door out sends through every channel
                log.info("channel %s started", spec.name)
                if console is not None and spec.name == "http":
                    port = getattr(channel, "port", settings.http.port)
                    log.info("web console at http://%s:%s/console", settings.http.host, port)
        recovery = asyncio.create_task(path.recovery.run(self._recovery_stop))
        self._stack.push_async_callback(self._stop_recovery, recovery)
        if self.jobs is not None:  # stops with recovery too: running jobs are let go
            jobs = asyncio.create_task(self.jobs.run(self._recovery_stop))
            self._stack.push_async_callback(self._stop_recovery, jobs)
        if self.knowledge is not None:  # the knowledge folder's changes become jobs
            self.knowledge.watch(self._recovery_stop, self._stack)
        self.digest.watch(self._recovery_stop, self._stack)  # the feeds' polls
        if self.scheduler is not None:  # stops with recovery (the same stop event)
            reminders = asyncio.create_task(self.scheduler.run(self._recovery_stop))
            self._stack.push_async_callback(self._stop_recovery, reminders)

    def _console(self) -> Console | None:
        """The operator's console on the HTTP server, when a password is set for it."""
        self.console = web_console(self.settings, self.mode == "run", self._stack, self._pages)
        return self.console

    def _pages(self, errors: RecentErrors) -> ConsoleDeps:
        from bot.console import ConsoleDeps  # only when served

        assert self.storage is not None and self.processor is not None
        assert self.chat_settings is not None
        return ConsoleDeps(
            settings=self.settings,
            storage=self.storage,
            health=self.health,
            extra_health=self.extra_health,
            last_report=self.processor.last_report,
            errors=errors,
            chat_settings=self.chat_settings,
            knowledge=knowledge_desk(self.knowledge),  # the Knowledge page, when enabled
        )

    async def _stop_recovery(self, task: asyncio.Task[None]) -> None:
        self._recovery_stop.set()
        await task

    def _vision_reader(self, meter: UsageMeter, tools: ToolLoop) -> VisionReader:
        provider = vision_model(self.settings, self._stack)
        if provider is not None:
            self._models["vision"] = provider
        # The words an image shows pass the same marker defuser as every tool result.
        return vision_reader(self.settings, provider, meter, tools.defuse_markers)

    def _tool_loop(self, llm: LLMProvider, meter: UsageMeter, mcp: Any = None) -> ToolLoop:
        tools = self.settings.tools
        search = self._seams.search
        if search is None:
            backend = duckduckgo_backend(tools.search_results, tools.search_timeout_s)
            self._stack.callback(backend.close)
            search = backend
        registry = default_registry(search, search_enabled=tools.search)
        add_remind_tool(registry, self.reminders)  # the guide keeps Remind right after Forget
        if mcp is not None and tools.mode == "markers":
            registry.register(mcp.marker_tool())  # `[Call: server__tool {...}]`
        self._shared.add_tools(registry)
        if self._drawing is not None:
            self._drawing.add_tool(registry)  # offered only to those [images] allow
        if self.knowledge is not None:
            self.knowledge.add_tool(registry)  # searches the sender's chat and global
        self._tasks.add_tool(registry)  # offered only to those [jobs] spawn_allow
        add_sandbox_tool(registry, self._sandbox)  # run_python, offered to [sandbox] allow
        return ToolLoop(
            registry,
            llm,
            max_rounds=tools.max_rounds,
            handler_timeout_s=tools.search_timeout_s + 2,
            mode=tools.mode,
            max_tokens=self.settings.llm.reply_tokens,
            meter=meter,
            source=mcp,
        )

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Finish in-flight turns (channels still up to deliver them), then close all."""
        self._recovery_stop.set()
        if self.processor is not None:
            await self.processor.shutdown(timeout_s)
        await self._stack.aclose()
        self.channels.clear()

    async def wait_console_or(self, stop: asyncio.Event) -> None:
        """Run until asked to stop, or until the person at the console ends the session."""
        waiters = [asyncio.ensure_future(stop.wait())]
        for channel in self.channels:
            finished = getattr(channel, "finished", None)
            if isinstance(finished, asyncio.Event):
                waiters.append(asyncio.ensure_future(finished.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()


async def _persona(chat_settings: CachedChatSettings, platform: str, chat_id: str) -> str:
    """The processor's persona lookup (core.context.turn.ChatPersona)."""
    return (await chat_settings.get(ChatKey(platform, chat_id))).persona
