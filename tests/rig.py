"""The daemon's own wiring on the fakes: settings for loopback servers, and a built turn path.

Why here: tests that drive the processor, the dispatcher or the commands directly used
to copy bot/wiring/app.py's wiring (store, counter, context builder, tool loop, processor,
dispatcher), and a copy can drift from what the daemon runs. They now build the parts
with `App.build()` from a `Settings`, exactly as `chatterd run` does, and put in only
what a test must own (its storage, an image reader) through `bot.wiring.app.Seams`.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.commands.table import Commands
from bot.config import Settings
from bot.wiring.app import App, Seams, TurnPath
from bot.wiring.registry import ChannelDeps
from core.messages import ChatType, DeliveryError, InboundMessage, OutboundMessage, Reply, Sent
from core.tools.search import SearchBackend
from core.turn.gate import Gate
from core.turn.processor import MessageProcessor
from core.turn.reading import ImageReader
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI, echo_last_user

ADMIN = "telegram:1000"


def telegram_section(tg: Any) -> dict[str, Any]:
    """`[telegram]` on a FakeTelegram; poll_stall_s caps the long poll at a third of it,
    so stopping never waits long."""
    return {"enabled": True, "token": tg.token, "api_base_url": tg.root, "poll_stall_s": 3.0}


def settings_for(
    tmp_path: Path,
    database_url: str | None,
    chat: FakeOpenAI,
    vision_model: FakeOpenAI | None = None,
    **sections: dict[str, Any],
) -> Settings:
    """A daemon on the fakes: the chat model (and a describing vision model) on loopback, the
    workspace in `tmp_path`, no HTTP server, no web search. `sections` are merged into
    the defaults, so `bot={...}` keeps the name and the workspace."""
    data: dict[str, Any] = {
        "bot": {"name": "chatterd", "workspace": str(tmp_path / "workspace")},
        "llm": {
            "base_url": chat.base_url,
            "api_key": "sk-test-chat",
            "model": chat.model,
            "timeout_s": 10,
            "max_retries": 0,
        },
        "http": {"enabled": False},
        "tools": {"search": False},  # no DuckDuckGo from tests
        # Tests written before bursts answer each message alone; burst tests turn it on.
        "groups": {"burst_ms": 0},
        "private": {"burst_ms": 0},
        # Running code is tested in tests/sandbox/, which turns it on with its own folder.
        "sandbox": {"enabled": False, "folder": str(tmp_path / "sandbox")},
    }
    if database_url is not None:
        data["storage"] = {"url": database_url}
    if vision_model is not None:
        data["vision"] = {
            "enabled": True,
            "mode": "describe",
            "base_url": vision_model.base_url,
            "api_key": "sk-test-vision",
            "model": vision_model.model,
        }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return Settings.model_validate(data)


@asynccontextmanager
async def daemon(settings: Settings, seams: Seams | None = None) -> AsyncIterator[App]:
    """`chatterd run` as the CLI composes it, minus the console (stdin is not a tty)."""
    deps = ChannelDeps(settings, dict, io.StringIO(), io.StringIO(), "tester")
    async with App(settings, mode="run", deps=deps, seams=seams) as app:
        yield app


@asynccontextmanager
async def turn_path(settings: Settings, seams: Seams) -> AsyncIterator[tuple[App, TurnPath]]:
    """`App.build()` for the block (no channels, no recovery loop), stopped after it."""
    app = App(settings, seams=seams)
    path = await app.build()
    try:
        yield app, path
    finally:
        await app.stop(2.0)


class Waiting:
    """The rig's channel for its (Telegram-shaped) messages: like HTTP, it answers only a
    request still waiting, paired by request_id (see channels/http/channel.py), so a test reads
    what the one door out sent for the message it handed in."""

    pushes = False

    def __init__(self, name: str = "telegram") -> None:
        self.name = name
        self.sent: list[OutboundMessage] = []
        self._waiting: dict[str, list[OutboundMessage]] = {}

    async def send(self, message: OutboundMessage) -> Sent:
        answers = self._waiting.get(message.request_id or "")
        if answers is None:
            raise DeliveryError("no request is waiting")
        answers.append(message)
        self.sent.append(message)
        return Sent()

    def restore_image(self, locator: str, mime: str | None, name: str) -> None:
        return None

    async def ask(
        self, handler: Callable[[InboundMessage], Awaitable[None]], message: InboundMessage
    ) -> list[OutboundMessage]:
        """Hand `message` to `handler` as a waiting request; what was sent for it."""
        request = uuid.uuid4().hex
        self._waiting[request] = answers = []
        try:
            await handler(replace(message, request_id=request))
        finally:
            del self._waiting[request]
        return answers


async def answer_of(app: App, message: InboundMessage) -> str | None:
    """The daemon's processor's answer to `message`, read at the one door out by a
    Waiting channel standing in for its platform's."""
    assert app.processor is not None
    waiting = Waiting(message.platform)
    app.routes.add(waiting)
    try:
        sent = await waiting.ask(app.processor.handle, message)
    finally:
        app.routes.remove(waiting)
    return sent[0].text if sent else None


@dataclass
class Rig:
    """The daemon's turn path without channels, on one FakeOpenAI."""

    fake: FakeOpenAI
    storage: SqlStorage
    app: App
    processor: MessageProcessor
    commands: Commands
    dispatcher: Gate
    channel: Waiting = field(default_factory=Waiting)

    async def reply(self, message: InboundMessage) -> str | None:
        """The processor's answer to `message`, as sent through the outbox (None: none)."""
        sent = await self.channel.ask(self.processor.handle, message)
        return sent[0].text if sent else None

    async def answer(self, message: InboundMessage) -> Reply | None:
        """The dispatcher's answer to `message` as the chat sees it (None: silence)."""
        sent = await self.channel.ask(self.dispatcher, message)
        if not sent:
            return None
        return Reply(sent[0].text, private=sent[0].private_to is not None)


@asynccontextmanager
async def build_rig(
    storage: SqlStorage,
    tmp_path: Path,
    *,
    reply: Any = echo_last_user,
    context_window: int = 16000,
    reply_tokens: int = 256,
    timeout_s: float = 5.0,
    max_retries: int = 0,
    admins: frozenset[str] = frozenset({ADMIN}),
    compaction_min_turns: int | None = None,
    read_images: ImageReader | None = None,
    search: SearchBackend | None = None,
    **sections: dict[str, Any],
) -> AsyncIterator[Rig]:
    """`App.build()` on `storage` (the test's), with the model on a FakeOpenAI answering
    `reply`, the wake word "bot", two tool rounds, web search only on a given `search`
    backend, and compaction only when asked for; `sections` add config sections
    (`images={...}`) or keys of `tools`."""
    compaction: dict[str, Any] = {"compaction": compaction_min_turns is not None}
    if compaction_min_turns is not None:
        compaction["compaction_min_turns"] = compaction_min_turns
    async with FakeOpenAI(reply) as fake:
        settings = settings_for(
            tmp_path,
            None,
            fake,
            bot={"admins": sorted(admins)},
            llm={
                "context_window": context_window,
                "reply_tokens": reply_tokens,
                "timeout_s": timeout_s,
                "max_retries": max_retries,
            },
            tools={"max_rounds": 2, "search": search is not None, **sections.pop("tools", {})},
            groups={"wake_words": ["bot"]},
            context=compaction,
            **sections,
        )
        seams = Seams(storage=storage, read_images=read_images, search=search)
        async with turn_path(settings, seams) as (app, path):
            rig = Rig(fake, storage, app, path.processor, path.commands, path.dispatcher)
            app.routes.add(rig.channel)
            yield rig


def msg(
    text: str,
    *,
    platform: str = "telegram",
    chat: str = "1",
    sender: str = "1",
    name: str = "Alice",
    group: bool = False,
    mid: str | None = None,
    **extra: Any,
) -> InboundMessage:
    """A Telegram message from Alice in a private chat, unless told otherwise."""
    return InboundMessage(
        platform=platform,
        chat_id=chat,
        chat_type=ChatType.GROUP if group else ChatType.PRIVATE,
        sender_id=sender,
        sender_name=name,
        text=text,
        message_id=mid,
        **extra,
    )
