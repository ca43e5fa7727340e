"""The sandbox in the daemon (`[sandbox]`): the engine picked, the chats' folders, the
`run_python` tool, documents shared in a chat kept under its in/, and the files a run
makes sent through the one door.

Why a module of its own: bot/wiring/app.py stays a table of parts; which engine runs
here is decided (and logged with its reason) once, at start, and the wasi engine's slow
first compile is started here in the background, never inside someone's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Protocol

from bot.config import Settings
from bot.wiring.limits import limits_from
from bot.wiring.shared_media import SharedMedia
from core.admins import Admins
from core.messages import Attachment, InboundMessage, OutboundMessage
from core.sandbox.folders import ChatFolders
from core.sandbox.pick import pick_engine
from core.sandbox.run import RunLimits
from core.sandbox.service import Sandbox, SandboxRules
from core.sandbox.tool import python_tool
from core.sandbox.wasi import WasiEngine
from core.tools.registry import ToolRegistry
from core.turn.delivery import Outbox

log = logging.getLogger(__name__)


@dataclass
class DaemonSandbox:
    sandbox: Sandbox

    def add_tool(self, registry: ToolRegistry) -> None:
        registry.register(python_tool(self.sandbox))

    async def keep_shared(self, message: InboundMessage, doc: Attachment, data: bytes) -> None:
        folders = self.sandbox.folders
        name = doc.name or "document"
        try:
            await asyncio.to_thread(
                folders.save_shared, message.platform, message.chat_id, name, data
            )
        except OSError as exc:
            log.warning("sandbox: a shared document was not kept: %s", type(exc).__name__)


def add_sandbox_tool(registry: ToolRegistry, sandbox: DaemonSandbox | None) -> None:
    if sandbox is not None:
        sandbox.add_tool(registry)


async def build_sandbox(
    settings: Settings,
    admins: Admins,
    stack: AsyncExitStack,
    shared: SharedMedia,
    door: HasOutbox,
) -> DaemonSandbox | None:
    """The sandbox's parts, or None when `[sandbox] enabled` is false or no engine runs
    here (the log says why). Files leave through `door`'s Outbox (the one door, built
    after the tools); documents the shared reader fetches are kept in their chat's in/."""
    config = settings.sandbox
    if not config.enabled:
        return None
    root = config.folder.resolve()
    picked = await pick_engine(
        config.engine, root, config.wasi_cache.resolve(), config.python or None
    )
    if picked.engine is None:
        log.warning("sandbox: run_python is off: %s", picked.why)
        return None
    log.info("sandbox: run_python runs on %s", picked.why)
    limits = limits_from(config, RunLimits)
    owner = getattr(picked.engine, "run_as", None)
    folders = ChatFolders(root, config.keep_hours, owner)
    rules = SandboxRules(
        allow=config.allow,
        admins=admins,
        max_running=config.max_running,
        max_files=config.max_files,
    )
    if isinstance(picked.engine, WasiEngine):
        warming = asyncio.create_task(picked.engine.warm(folders.root / ".warm"))
        stack.push_async_callback(_cancel, warming)
    built = DaemonSandbox(Sandbox(picked.engine, folders, limits, rules))
    built.sandbox.attach(functools.partial(_tell, door))
    shared.reader.keep_documents(built.keep_shared)
    return built


class HasOutbox(Protocol):
    """The App: its `outbox` exists once the turn path is built."""

    outbox: Outbox | None


async def _tell(door: HasOutbox, message: OutboundMessage) -> bool:
    return door.outbox is not None and await door.outbox.tell(message)


async def _cancel(task: asyncio.Task[bool]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
