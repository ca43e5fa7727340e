"""The console channel: talk to the bot in a terminal or through a pipe (`chatterd chat`).

Lines are read on a helper thread because a blocking `readline()` must not stall the
event loop, and because `loop.connect_read_pipe` refuses regular files (`chat < file`)
while a thread works the same for a TTY, a pipe and a file. The thread hands lines over
one at a time (bounded), so a huge piped file is not slurped into memory. Messages are
answered strictly in order; on end of input `finished` is set and the CLI stops cleanly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from datetime import UTC, datetime
from typing import BinaryIO, TextIO

from channels.base import ChannelHealth, MessageHandler, TextOnly
from core.inject import clean_name
from core.messages import ChatType, DeliveryError, InboundMessage, OutboundMessage, Sent, TryLater

log = logging.getLogger(__name__)

PLATFORM = "console"
MAX_LINE_CHARS = 16_000
APOLOGY = "Sorry, something went wrong with that message. Please try again."
_HANDOFF_POLL_S = 0.5
# Read cap per line in bytes or characters (UTF-8 takes up to 4 bytes per character).
_MAX_LINE_UNITS = MAX_LINE_CHARS * 4
# Stands for "a line too long to keep": real input can never equal it, NULs are dropped.
_OVERLONG = "\x00overlong"


class _OutputClosed(Exception):
    """The terminal or pipe we write to went away; nobody can read replies any more."""


class ConsoleChannel(TextOnly):
    """Channel Protocol implementation for a local terminal session, a private chat."""

    name = "console"
    pushes = True
    one_at_a_time = True  # the next line is read after this one's answer: no bursts

    def __init__(
        self,
        input: TextIO | asyncio.StreamReader,
        output: TextIO,
        *,
        user_id: str,
        user_name: str,
        bot_name: str = "chatterd",
        prompt: bool = False,
    ) -> None:
        self._input = input
        self._output = output
        self._user_id = user_id
        self._user_name = clean_name(user_name, fallback=user_id)
        self._bot_name = bot_name
        self._prompt = prompt
        self._health = ChannelHealth()
        self._task: asyncio.Task[None] | None = None
        self._thread_stop = threading.Event()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue(maxsize=1)
        self.finished = asyncio.Event()

    async def start(self, handler: MessageHandler) -> None:
        if self._task is not None:
            raise RuntimeError("console channel already started")
        if not isinstance(self._input, asyncio.StreamReader):
            loop = asyncio.get_running_loop()
            thread = threading.Thread(
                target=self._pump, args=(loop,), name="console-reader", daemon=True
            )
            thread.start()
        self._health.state = "running"
        self._task = asyncio.create_task(self._run(handler), name="console-channel")

    async def stop(self) -> None:
        self._thread_stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._health.state = "stopped"
        self.finished.set()

    async def send(self, message: OutboundMessage) -> Sent:
        """Replies the core sends (and ones recovered after a restart) are printed."""
        try:
            self._say(message.text)
        except _OutputClosed:
            raise DeliveryError("the console output is closed") from None
        self._health.last_ok = datetime.now(UTC)
        return Sent()

    def health(self) -> ChannelHealth:
        return self._health

    async def _run(self, handler: MessageHandler) -> None:
        try:
            self._show_prompt()
            while (line := await self._next_line()) is not None:
                text = line.strip()
                if line is _OVERLONG:
                    self._say(f"That message is too long (over {MAX_LINE_CHARS} characters).")
                elif text:
                    await self._answer(handler, text)
                self._show_prompt()
            if self._prompt:
                self._write("\n")  # leave the shell prompt on a line of its own after ^D
        except _OutputClosed:
            log.info("console output closed; ending the console session")
        finally:
            self._thread_stop.set()
            self._health.state = "stopped"
            self.finished.set()

    async def _answer(self, handler: MessageHandler, text: str) -> None:
        if len(text) > MAX_LINE_CHARS:
            self._say(f"That message is too long (over {MAX_LINE_CHARS} characters).")
            return
        message = InboundMessage(
            platform=PLATFORM,
            chat_id=self._user_id,
            chat_type=ChatType.PRIVATE,
            sender_id=self._user_id,
            sender_name=self._user_name,
            text=text,
        )
        try:
            await handler(message)  # the answer comes back through send()
        except TryLater:
            pass  # kept; answered after the restart
        except Exception as exc:
            # The person at the terminal gets an apology, not a traceback; details go to
            # the log at debug level so they do not scribble over the conversation.
            log.error("console message failed: %s", type(exc).__name__)
            log.debug("console message failure details", exc_info=True)
            self._say(APOLOGY)

    async def _next_line(self) -> str | None:
        if not isinstance(self._input, asyncio.StreamReader):
            return await self._lines.get()
        try:
            raw = await self._input.readline()
        except ValueError:  # over the reader's own limit; it has discarded the line
            return _OVERLONG
        return _clean(raw.decode("utf-8", "replace")) if raw else None

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        """Reader thread: blocking readline(), then hand the line to the loop and wait."""
        buffer = getattr(self._input, "buffer", None)
        binary: BinaryIO | None = buffer if hasattr(buffer, "readline") else None
        try:
            while not self._thread_stop.is_set():
                line = self._read_one(binary)
                if not self._hand_over(loop, line):
                    return
                if line is None:
                    return
        except RuntimeError:
            return  # the event loop is closed: the session is over anyway

    def _read_one(self, binary: BinaryIO | None) -> str | None:
        """One line, or None at end of input; a line too long to keep is skipped whole."""
        source: BinaryIO | TextIO = binary if binary is not None else self._input  # type: ignore[assignment]
        try:
            chunk = source.readline(_MAX_LINE_UNITS + 1)
            if not chunk:
                return None
            if len(chunk) > _MAX_LINE_UNITS:
                while chunk and not _ends_line(chunk):  # drop the rest of the line
                    chunk = source.readline(65536)
                return _OVERLONG
        except (OSError, ValueError) as exc:
            log.warning("console input failed (%s); ending the session", type(exc).__name__)
            return None
        # Decoding bytes ourselves means a stray invalid byte is replaced, not fatal.
        text = chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk
        return _clean(text)

    def _hand_over(self, loop: asyncio.AbstractEventLoop, line: str | None) -> bool:
        future = asyncio.run_coroutine_threadsafe(self._lines.put(line), loop)
        while True:
            try:
                future.result(timeout=_HANDOFF_POLL_S)
                return True
            except TimeoutError:
                if self._thread_stop.is_set():
                    future.cancel()
                    return False
            except concurrent.futures.CancelledError:
                return False

    def _show_prompt(self) -> None:
        if self._prompt:
            self._write("you> ")

    def _say(self, text: str) -> None:
        self._write(f"{self._bot_name}> {text}\n")

    def _write(self, text: str) -> None:
        try:
            self._output.write(text)
            self._output.flush()
        except (OSError, ValueError) as exc:  # BrokenPipeError, or a closed file
            raise _OutputClosed from exc


def _ends_line(chunk: str | bytes) -> bool:
    return chunk.endswith(b"\n") if isinstance(chunk, bytes) else chunk.endswith("\n")


def _clean(line: str) -> str:
    """Drop what no store can hold: NUL (PostgreSQL refuses it) and lone surrogates."""
    return line.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
