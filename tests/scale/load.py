"""Many chats, a few messages each, spread over real `chatterd run` replicas over HTTP;
what the model was sent and what the database holds afterwards, checked together.

Why its own module: the replica tests and bench/scale_bench.py run the same load and
read the same facts (answers, model calls, peak connections).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests.fakes.openai_server import FakeOpenAI, content_text, last_user_text
from tests.faults.daemon import Daemon

# Per message: a replica killed mid-request, or at its [http] max_connections (503), is
# tried again on the next one, up to a few minutes in all.
ATTEMPTS = 300


def said(body: dict[str, Any]) -> str:
    """The message text of the request's last user turn (after `[name]: `)."""
    return (last_user_text(body) or "").split("]: ", 1)[-1].strip()


def echo(body: dict[str, Any]) -> str:
    return f"re {said(body)}"


def text_of(chat: int, index: int) -> str:
    return f"c{chat} m{index}"


@dataclass
class Load:
    """`chats` private chats (user u<n> each), `messages` sent one after another in each
    chat, message k of chat c to replica (c + k) mod n, so one chat's turns cross replicas."""

    daemons: Sequence[Daemon]
    chats: int
    messages: int
    answers: dict[int, list[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    done: int = 0
    milestone: int = 0  # `reached` is set once this many messages are answered
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, limit_s: float) -> None:
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            chats = [self._chat(session, c) for c in range(self.chats)]
            await asyncio.wait_for(asyncio.gather(*chats), limit_s)

    async def _chat(self, session: aiohttp.ClientSession, chat: int) -> None:
        for index in range(self.messages):
            reply = await self._send(session, chat, index)
            if reply is None:
                return
            self.answers.setdefault(chat, []).append(reply)
            self.done += 1
            if self.done >= self.milestone:
                self.reached.set()

    async def _send(self, session: aiohttp.ClientSession, chat: int, index: int) -> str | None:
        body = {
            "user_id": f"u{chat}",
            "chat_type": "private",
            "sender_name": f"u{chat}",
            "text": text_of(chat, index),
            "message_id": f"c{chat}m{index}",
        }
        for attempt in range(ATTEMPTS):
            daemon = self.daemons[(chat + index + attempt) % len(self.daemons)]
            if daemon.proc is None or daemon.proc.returncode is not None:
                continue
            try:
                async with session.post(f"{daemon.base_url}/v1/chat", json=body) as response:
                    answer = await response.json()
                    if response.status == 200 and answer.get("reply"):
                        return str(answer["reply"])
                    if response.status not in (503, 504):
                        self.failures.append(f"c{chat}m{index}: {response.status} {answer}")
                        return None
            except (aiohttp.ClientError, TimeoutError):
                pass  # the replica went away mid-request: the same message id elsewhere
            await asyncio.sleep(min(0.1 * (attempt + 1), 1.0))
        self.failures.append(f"c{chat}m{index}: never answered")
        return None


def model_calls(model: FakeOpenAI) -> Counter[str]:
    """How often each message text was sent to the model as the current message."""
    return Counter(said(request.json or {}) for request in chat_requests(model))


def chat_requests(model: FakeOpenAI) -> list[Any]:
    return [r for r in model.requests if r.path.endswith("/chat/completions") and r.json]


def unseen_replies(model: FakeOpenAI) -> list[str]:
    """Model requests for message k of a chat whose context lacked a reply to an earlier
    message of that chat (each turn must see every earlier reply)."""
    missing = []
    for request in chat_requests(model):
        current = said(request.json)
        chat, index = current.split()
        earlier = {
            content_text(m.get("content"))
            for m in request.json.get("messages", [])
            if m.get("role") == "assistant"
        }
        for k in range(int(index[1:])):
            if f"re {chat} m{k}" not in earlier:
                missing.append(f"{current} without re {chat} m{k}")
    return missing


class Connections:
    """Samples the replicas' sessions in pg_stat_activity until stopped; keeps the peak."""

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url)
        schema = url.query.get("search_path") or "public"
        self._prefix = f"chatterd/{schema}"[:50].replace("_", r"\_") + "%"
        self._url = url.difference_update_query(["search_path", "pgbouncer"])
        self.peak = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Connections:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _sample(self) -> None:
        engine = create_async_engine(self._url, poolclass=NullPool)
        query = text("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE :p")
        try:
            async with engine.connect() as conn:
                while not self._stop.is_set():
                    found = (await conn.execute(query, {"p": self._prefix})).scalar_one()
                    await conn.rollback()
                    self.peak = max(self.peak, int(found))
                    try:
                        await asyncio.wait_for(self._stop.wait(), 0.05)
                    except TimeoutError:
                        pass
        finally:
            await engine.dispose()


async def stored_conversations(database_url: str, chats: int) -> dict[int, list[str]]:
    """Each chat's stored turns' contents, oldest first (user turns as `[name]: text`)."""
    from memory.turns.store import open_storage

    storage = await open_storage(database_url, migrate=False, pool_size=2)
    try:
        found = {}
        for chat in range(chats):
            turns = await storage.recent_turns("http", f"u{chat}", 100)
            found[chat] = [t.content.split("]: ", 1)[-1].strip() for t in turns]
        return found
    finally:
        await storage.close()
