"""The console channel driven through real OS pipes, as `chatterd chat < file` would be."""

from __future__ import annotations

import asyncio
import io
import os
import threading
import time
from collections.abc import AsyncIterator
from typing import TextIO

import pytest

from channels.console import APOLOGY, MAX_LINE_CHARS, ConsoleChannel
from core.messages import ChatType, InboundMessage, OutboundMessage, Reply
from tests.fakes.door import Door, start_answering


class Recorder:
    """The handler seam: echoes, records, and notes how many messages run at once."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.messages: list[InboundMessage] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.door = Door()  # answers go out through the channel's send(), as in the daemon

    async def __call__(self, message: InboundMessage) -> None:
        await self.door.answer(message, await self._answer(message))

    async def _answer(self, message: InboundMessage) -> Reply | None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for _ in range(3):
                await asyncio.sleep(0)  # yield, so overlapping calls would show up
            self.messages.append(message)
            self.seen.append(message.text)
            if message.text == "fail":
                raise RuntimeError("secret internals")
            if message.text == "quiet":
                return None
            return Reply(f"echo: {message.text}")
        finally:
            self.in_flight -= 1


class Pipe:
    """An os.pipe(): the channel reads one end, the test writes the other from a thread."""

    def __init__(self) -> None:
        r, w = os.pipe()
        self.reader: TextIO = os.fdopen(r, "r", encoding="utf-8")
        self.w: int | None = w

    async def feed(self, data: bytes, *, close: bool = True) -> None:
        # From a thread: a big write would otherwise block the loop the reader hands to.
        def write() -> None:
            assert self.w is not None
            view = memoryview(data)
            while view:
                view = view[os.write(self.w, view) :]
            if close:
                self.close_writer()

        await asyncio.to_thread(write)

    def close_writer(self) -> None:
        if self.w is not None:
            os.close(self.w)
            self.w = None


@pytest.fixture
async def pipe() -> AsyncIterator[Pipe]:
    p = Pipe()
    yield p
    p.close_writer()
    deadline = time.monotonic() + 5
    while any(t.name == "console-reader" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "console reader thread did not end"
        await asyncio.sleep(0.01)
    p.reader.close()


async def run_console(
    pipe: Pipe, data: bytes, *, prompt: bool = False
) -> tuple[str, Recorder, ConsoleChannel]:
    out = io.StringIO()
    channel = ConsoleChannel(
        pipe.reader, out, user_id="alice", user_name="Alice", bot_name="chatterd", prompt=prompt
    )
    recorder = Recorder()
    await start_answering(channel, recorder)
    await pipe.feed(data)
    await asyncio.wait_for(channel.finished.wait(), 5)
    await channel.stop()
    return out.getvalue(), recorder, channel


async def test_lines_are_answered_in_order_and_eof_finishes(pipe: Pipe) -> None:
    out, rec, channel = await run_console(pipe, b"one\n\n   \ntwo\nthree")
    assert out == "chatterd> echo: one\nchatterd> echo: two\nchatterd> echo: three\n"
    assert rec.seen == ["one", "two", "three"]  # blank lines skipped, last line without \n kept
    assert rec.max_in_flight == 1
    msg = rec.messages[0]
    assert (msg.platform, msg.chat_id, msg.sender_id, msg.sender_name) == (
        "console",
        "alice",
        "alice",
        "Alice",
    )
    assert msg.chat_type is ChatType.PRIVATE
    assert channel.health().state == "stopped"


async def test_many_lines_stay_in_order_one_at_a_time(pipe: Pipe) -> None:
    lines = [f"line {i}" for i in range(200)]
    out, rec, _ = await run_console(pipe, ("\n".join(lines) + "\n").encode())
    assert rec.seen == lines and rec.max_in_flight == 1
    assert out.splitlines() == [f"chatterd> echo: {line}" for line in lines]


async def test_handler_error_prints_an_apology_and_goes_on(pipe: Pipe) -> None:
    out, rec, _ = await run_console(pipe, b"fail\nquiet\nafter\n")
    assert out == f"chatterd> {APOLOGY}\nchatterd> echo: after\n"
    assert "secret" not in out and "Traceback" not in out
    assert rec.seen == ["fail", "quiet", "after"]


async def test_prompt_only_when_interactive(pipe: Pipe) -> None:
    out, _, _ = await run_console(pipe, b"hi\n", prompt=True)
    assert out == "you> chatterd> echo: hi\nyou> \n"


async def test_invalid_utf8_and_nul_are_cleaned_not_fatal(pipe: Pipe) -> None:
    _, rec, _ = await run_console(pipe, b"caf\xff\x00e\nnext\n")
    assert rec.seen == ["caf\ufffde", "next"]


async def test_overlong_line_is_refused_and_the_session_goes_on(pipe: Pipe) -> None:
    data = b"z" * (MAX_LINE_CHARS * 5) + b"\n" + b"y" * (MAX_LINE_CHARS + 1) + b"\nok\n"
    out, rec, _ = await run_console(pipe, data)
    assert rec.seen == ["ok"]
    assert out.count("too long") == 2 and out.endswith("chatterd> echo: ok\n")


async def test_stop_while_waiting_for_input(pipe: Pipe) -> None:
    out = io.StringIO()
    channel = ConsoleChannel(pipe.reader, out, user_id="u", user_name="U")
    await start_answering(channel, Recorder())
    await pipe.feed(b"first\n", close=False)
    deadline = time.monotonic() + 5
    while "echo: first" not in out.getvalue():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await channel.stop()
    assert channel.finished.is_set() and channel.health().state == "stopped"


async def test_closed_output_ends_the_session_quietly(pipe: Pipe) -> None:
    r, w = os.pipe()
    os.close(r)  # nobody reads replies: writing raises BrokenPipeError
    broken = os.fdopen(w, "w", encoding="utf-8")
    try:
        channel = ConsoleChannel(pipe.reader, broken, user_id="u", user_name="U")
        await start_answering(channel, Recorder())
        await pipe.feed(b"hello\nagain\n")
        await asyncio.wait_for(channel.finished.wait(), 5)
        await channel.stop()
    finally:
        try:
            broken.close()
        except BrokenPipeError:
            pass


async def test_stream_reader_input_and_send() -> None:
    reader = asyncio.StreamReader()
    out = io.StringIO()
    channel = ConsoleChannel(reader, out, user_id="u", user_name="U", bot_name="bot")
    rec = Recorder()
    await start_answering(channel, rec)
    await channel.send(OutboundMessage(platform="console", chat_id="u", text="a note"))
    reader.feed_data("héllo\n\nbye\n".encode())
    reader.feed_eof()
    await asyncio.wait_for(channel.finished.wait(), 5)
    await channel.stop()
    assert rec.seen == ["héllo", "bye"]
    assert out.getvalue() == "bot> a note\nbot> echo: héllo\nbot> echo: bye\n"


async def test_plain_text_io_input_without_a_byte_buffer() -> None:
    source = io.StringIO("first\n\nsecond\n")
    out = io.StringIO()
    channel = ConsoleChannel(source, out, user_id="u", user_name="U")
    rec = Recorder()
    await start_answering(channel, rec)
    await asyncio.wait_for(channel.finished.wait(), 5)
    await channel.stop()
    assert rec.seen == ["first", "second"]
    assert out.getvalue() == "chatterd> echo: first\nchatterd> echo: second\n"
