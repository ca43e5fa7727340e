"""One run for one person in one chat: the permission asked again, a slot among
`max_running`, the engine in the chat's folder, the files of out/ sent once, and the
observation the model reads.

Why the permission is asked here too: the tool is left out of the request of anyone
`[sandbox] allow` does not name, but a model may write a call it was not shown (an old
turn, an injection); the rule is applied again at the moment the code would run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from core.admins import Admins
from core.messages import OutboundMessage
from core.sandbox.folders import ChatFolders, Collected, OutFile
from core.sandbox.run import Engine, RunLimits, RunResult
from core.tools.mcp.config import Allow
from core.tools.mcp.permission import Sender, allows
from core.tools.registry import Observation, ToolContext

log = logging.getLogger(__name__)

Send = Callable[[OutboundMessage], Awaitable[bool]]
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")


@dataclass(frozen=True)
class SandboxRules:
    allow: Allow
    admins: Admins
    max_running: int = 2
    max_files: int = 5


class Sandbox:
    def __init__(
        self,
        engine: Engine,
        folders: ChatFolders,
        limits: RunLimits,
        rules: SandboxRules,
    ) -> None:
        self.engine = engine
        self.folders = folders
        self.limits = limits
        self._rules = rules
        self._slots = asyncio.Semaphore(rules.max_running)
        self._send: Send | None = None

    def attach(self, send: Send) -> None:
        """The one door out (the Outbox's `tell`), known once it is built."""
        self._send = send

    def may_run(self, ctx: ToolContext) -> bool:
        admins = self._rules.admins
        if admins.operator(ctx):
            return True
        return allows(self._rules.allow, Sender(ctx.sender_key, admins.here(ctx)))

    async def run(self, code: str, ctx: ToolContext) -> Observation:
        if not self.may_run(ctx):
            log.info("sandbox: run refused for %s ([sandbox] allow)", ctx.sender_key)
            return Observation("Not run: running code is not available to you here.", ok=False)
        if not code.strip():
            return Observation("Not run: there is no code.", ok=False)
        async with self._slots:
            folder = await asyncio.to_thread(self._prepare, ctx)
            result = await self.engine.run(code, folder, self.limits)
            mb = self.limits.max_file_mb * 1024 * 1024
            collected = await asyncio.to_thread(
                self.folders.collect, folder, self._rules.max_files, mb
            )
        sent = await self._deliver(collected.files, ctx)
        log.info(
            "sandbox: %s run in %s:%s exit=%s stopped=%s files=%d",
            self.engine.name,
            ctx.platform,
            ctx.chat_id,
            result.exit_code,
            result.stopped,
            len(sent),
        )
        return observe(result, sent, collected, self.limits)

    def _prepare(self, ctx: ToolContext) -> Path:
        self.folders.prune()
        return self.folders.prepare(ctx.platform, ctx.chat_id)

    async def _deliver(self, files: list[OutFile], ctx: ToolContext) -> list[str]:
        sent: list[str] = []
        for file in files:
            image = file.data.startswith(_IMAGE_MAGIC)
            message = OutboundMessage(
                platform=ctx.platform,
                chat_id=ctx.chat_id,
                text=file.name,
                image=file.data if image else None,
                document=None if image else file.data,
                document_name=None if image else file.name,
                plain=True,
            )
            if self._send is not None and await self._send(message):
                sent.append(f"{file.name} ({'photo' if image else 'document'})")
            else:
                sent.append(f"{file.name} (could not be sent)")
        return sent


def observe(
    result: RunResult, sent: list[str], collected: Collected, limits: RunLimits
) -> Observation:
    """What the model reads: why it stopped (one line), the exit status, the output cut
    to `max_output_chars` together, and the files sent."""
    lines: list[str] = []
    if result.stopped == "timeout":
        lines.append(f"Stopped: the run took longer than its limit of {limits.timeout_s:g} s.")
    elif result.stopped == "memory":
        lines.append(f"Stopped: the run needed more than its limit of {limits.memory_mb} MB.")
    elif result.stopped == "file size":
        lines.append(f"Stopped: a file grew past its limit of {limits.max_file_mb} MB.")
    lines.append(
        f"Exit status: {'none (killed)' if result.exit_code is None else result.exit_code}"
    )
    room = limits.max_output_chars
    for label, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if not text:
            continue
        shown, room = text[:room], max(0, room - len(text))
        cut = len(text) - len(shown)
        lines.append(f"{label}:\n{shown}" + (f"\n…({cut} more characters cut)" if cut else ""))
    lines.append("Files sent to the chat: " + (", ".join(sent) if sent else "none"))
    if collected.refused:
        lines.append("Files not sent: " + ", ".join(collected.refused))
    ok = result.stopped is None and result.exit_code == 0
    return Observation("\n".join(lines), ok=ok)
