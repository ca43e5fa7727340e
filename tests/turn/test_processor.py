"""The daemon's main path, built by bot/wiring/app.py itself (tests/rig.py), against FakeOpenAI.

Real storage (SQLite, or PostgreSQL with CHATTERD_TEST_DATABASE_URL), the real
OpenAIProvider over HTTP, the real ContextBuilder over a tmp workspace and the real tool
loop; only the model is a fake server. No sleeps: pause()/resume() and request events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import bot.wiring.app as app_module
from core.media.vision import ImageNotes
from core.messages import ImageRef, InboundMessage, OutboundMessage, Reply, Sent, TryLater
from core.tools.registry import Observation, Tool, ToolContext, ToolRegistry
from core.tools.search import SearchResult
from core.turn.outcomes import APOLOGY, ShuttingDown
from memory.turns.store import SqlStorage
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import Rig, Waiting, build_rig, daemon, msg, settings_for


def system_prompt(request: Any) -> str:
    """Every system message's text: the stable head and this turn's tail after the history."""
    messages = request["messages"]
    assert messages[0]["role"] == "system"
    return "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")


def contents(request: Any) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m["role"] != "system"]


@pytest.fixture
async def rig(storage: SqlStorage, tmp_path: Path) -> AsyncIterator[Rig]:
    async with build_rig(storage, tmp_path) as built:
        yield built


async def test_one_chat_stays_in_order_under_concurrent_arrival(rig: Rig) -> None:
    rig.fake.pause()
    tasks = [asyncio.create_task(rig.reply(msg(f"question {i}", mid=str(i)))) for i in range(5)]
    await rig.fake.wait_for_requests(1)
    assert rig.fake.in_flight == 1  # the other four wait their turn, not the model
    rig.fake.resume()
    replies = await asyncio.wait_for(asyncio.gather(*tasks), 10)

    assert replies == [f"echo: [Alice]: question {i}" for i in range(5)]
    assert len(rig.fake.requests) == 5
    for k, request in enumerate(rig.fake.requests):
        seen = contents(request)
        assert seen[-1] == f"[Alice]: question {k}"
        expected: list[str] = []
        for j in range(k):
            expected += [f"[Alice]: question {j}", f"echo: [Alice]: question {j}"]
        assert seen[:-1] == expected
    turns = await rig.storage.recent_turns("telegram", "1", 100)
    assert [t.role for t in turns] == ["user", "assistant"] * 5


async def test_different_chats_are_answered_concurrently(rig: Rig) -> None:
    rig.fake.pause()
    a = asyncio.create_task(rig.reply(msg("hi from a", chat="a", sender="a")))
    b = asyncio.create_task(rig.reply(msg("hi from b", chat="b", sender="b")))
    await rig.fake.wait_for_requests(2)
    assert rig.fake.in_flight == 2  # both chats' model calls are open at the same time
    rig.fake.resume()
    assert await asyncio.wait_for(asyncio.gather(a, b), 10) == [
        "echo: [Alice]: hi from a",
        "echo: [Alice]: hi from b",
    ]


async def test_duplicate_delivery_is_answered_once_and_stored_once(rig: Rig) -> None:
    """Without a channel route the caller delivers (as HTTP does): a retry of the same
    message gets the one stored answer; the model is asked once, the turn stored once."""
    first = msg("hello", mid="77")
    again = msg("hello", mid="77")
    results = await asyncio.gather(rig.reply(first), rig.reply(again))
    assert results == ["echo: [Alice]: hello"] * 2
    assert await rig.reply(msg("hello", mid="77")) == "echo: [Alice]: hello"
    assert rig.fake.total_requests == 1
    turns = await rig.storage.recent_turns("telegram", "1", 100)
    assert [(t.role, t.platform_message_id) for t in turns] == [("user", "77"), ("assistant", None)]
    assert await rig.answer(msg("hello", mid="77")) == Reply("echo: [Alice]: hello")


class RecordingOutlet:
    """A channel that records what the core sends through it."""

    name = "telegram"
    pushes = True

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> Sent:
        self.sent.append(message)
        return Sent((str(len(self.sent)),))

    def restore_image(self, locator: str, mime: str | None, name: str) -> None:
        return None


async def test_a_pushing_channel_gets_one_send_and_duplicates_are_silent(rig: Rig) -> None:
    outlet = RecordingOutlet()
    rig.app.routes.add(outlet)
    processor = rig.processor
    results = await asyncio.gather(
        processor.handle(msg("hello", mid="77")), processor.handle(msg("hello", mid="77"))
    )
    assert results == [None, None]
    assert [m.text for m in outlet.sent] == ["echo: [Alice]: hello"]
    entry = await rig.storage.intake.by_message("telegram", "1", "77")
    assert entry is not None and entry.state == "delivered" and entry.delivery == {"ids": ["1"]}
    assert rig.fake.total_requests == 1


@pytest.mark.parametrize(
    ("script", "kind", "requests"),
    [
        ("hang", "timeout", 2),
        (500, "unavailable", 2),
        (429, "rate_limited", 2),
    ],
)
async def test_model_failure_after_retries_apologises_and_writes_nothing_half(
    storage: SqlStorage,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    script: Any,
    kind: str,
    requests: int,
) -> None:
    async with build_rig(storage, tmp_path, timeout_s=0.2, max_retries=1) as rig:
        if script == "hang":
            rig.fake.hang(times=2)
        else:
            rig.fake.fail(script, times=2, retry_after_ms=5)
        caplog.set_level(logging.INFO)
        caplog.clear()
        reply = await rig.answer(msg("are you there?", mid="5"))

        assert reply == Reply(APOLOGY[kind])
        assert rig.fake.total_requests == requests  # the SDK retried before giving up
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert warnings[0].name == "core.turn.processor"
        assert kind in warnings[0].getMessage() and "telegram:1" in warnings[0].getMessage()
        assert "sk-test" not in caplog.text
        turns = await storage.recent_turns("telegram", "1", 100)
        assert [(t.role, t.kind) for t in turns] == [("user", "message")]

        # The next turn works and still sees the unanswered question.
        assert await rig.answer(msg("hello again", mid="6")) == Reply("echo: [Alice]: hello again")
        assert "[Alice]: are you there?" in contents(rig.fake.requests[-1])


class OneResultSearch:
    """A SearchBackend with one answer for every query; remembers the queries."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str) -> list[SearchResult]:
        self.queries.append(query)
        return [SearchResult("Oslo weather", "https://example.org/oslo", "Sunny, 18 °C")]


async def test_a_search_the_model_asks_for_reaches_the_backend_and_the_next_round(
    storage: SqlStorage, tmp_path: Path
) -> None:
    """`[tools] search` through the daemon's wiring, with the backend put in as a seam."""
    search = OneResultSearch()
    async with build_rig(storage, tmp_path, search=search) as rig:
        rig.fake.reply("Let me look. [Search: weather in Oslo]")
        rig.fake.reply("Sunny and 18 °C in Oslo.")
        reply = await rig.reply(msg("what's the weather in Oslo?", mid="1"))
    assert reply == "Sunny and 18 °C in Oslo."
    assert search.queries == ["weather in Oslo"]
    assert "[Search: " in system_prompt(rig.fake.requests[0])  # the tool guide offers it
    assert "Sunny, 18 °C" in str(rig.fake.requests[1]["messages"][-1]["content"])
    turns = await storage.recent_turns("telegram", "1", 10)
    assert [(t.role, t.kind) for t in turns] == [
        ("user", "message"),
        ("assistant", "tool_call"),
        ("user", "tool_result"),
        ("assistant", "message"),
    ]
    assert "Sunny, 18 °C" in turns[2].content  # the next turn's context sees the result too


async def test_a_turn_offers_its_tools_and_runs_them_on_one_context(
    storage: SqlStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whom a tool is offered to and whom its call runs for are decided on the same facts:
    one ToolContext per turn, with the turn's memory and message."""
    offered: list[ToolContext] = []
    ran: list[ToolContext] = []

    async def probe(arg: str, ctx: ToolContext) -> Observation:
        ran.append(ctx)
        return Observation("probed")

    def offer(ctx: ToolContext) -> bool:
        offered.append(ctx)
        return True

    real = app_module.default_registry

    def with_probe(*args: Any, **kwargs: Any) -> ToolRegistry:
        registry = real(*args, **kwargs)
        registry.register(Tool("probe", "Probe", "[Probe: what]", probe, offered_to=offer))
        return registry

    monkeypatch.setattr(app_module, "default_registry", with_probe)
    async with build_rig(storage, tmp_path) as rig:
        rig.fake.reply("[Probe: it]")
        rig.fake.reply("Probed.")
        assert await rig.reply(msg("probe it", mid="1")) == "Probed."
    assert len(ran) == 1 and offered
    assert all(ctx is ran[0] for ctx in offered)  # the guide's, the check's and the call's
    assert ran[0].memory is storage and ran[0].extra["inbound"].text == "probe it"


async def test_untriggered_group_messages_become_context_of_the_next_turn(rig: Rig) -> None:
    said = msg("the meeting moved to 5pm", chat="-9", sender="2", name="Bob", group=True, mid="1")
    assert await rig.answer(said) is None
    assert rig.fake.total_requests == 0
    turns = await rig.storage.recent_turns("telegram", "-9", 10)
    assert [(t.kind, t.content) for t in turns] == [("context", "[Bob]: the meeting moved to 5pm")]

    asked = msg("chatterd, when is the meeting?", chat="-9", group=True, mid="2")
    assert await rig.answer(asked) == Reply("echo: [Alice]: chatterd, when is the meeting?")
    seen = contents(rig.fake.requests[0])
    assert seen == ["[Bob]: the meeting moved to 5pm", "[Alice]: chatterd, when is the meeting?"]


async def test_each_turn_sees_only_its_senders_memory(rig: Rig) -> None:
    await rig.storage.add_memory("telegram", "1", "Alice drinks green tea", "telegram:1")
    await rig.storage.add_memory("telegram", "2", "Bob plays the tuba", "telegram:2")
    alice = msg("chatterd what do I drink?", chat="-5", group=True, mid="1")
    bob = msg("chatterd what do I play?", chat="-5", sender="2", name="Bob", group=True, mid="2")
    await rig.answer(alice)
    await rig.answer(bob)
    await rig.answer(msg("chatterd and me?", chat="-5", group=True, mid="3"))

    first, second, third = (system_prompt(r) for r in rig.fake.requests)
    assert "green tea" in first and "tuba" not in first
    assert "tuba" in second and "green tea" not in second
    assert "green tea" in third and "tuba" not in third
    assert "telegram:1" in first and "telegram:2" in second  # the session rule names the sender


async def test_long_chat_outgrows_a_small_window_and_keeps_answering(
    storage: SqlStorage, tmp_path: Path
) -> None:
    filler = " ".join(f"word{i}" for i in range(60))
    async with build_rig(
        storage, tmp_path, reply="noted", context_window=3000, reply_tokens=200
    ) as rig:
        for i in range(40):
            assert await rig.reply(msg(f"{i} {filler}", mid=str(i))) == "noted"
        report = rig.processor.last_report("telegram", "1")
        assert report is not None
        assert report.history_dropped > 0
        assert report.history_kept > 0
        assert report.total_tokens <= report.budget == 3000 - 200
        last = rig.fake.requests[-1]["messages"]
        assert last[-1]["content"].startswith("[Alice]: 39 ")
        assert not any(str(m["content"]).startswith("[Alice]: 0 ") for m in last)
        assert rig.processor.last_report("telegram", "nope") is None


async def test_shutdown_drains_in_flight_turns_and_keeps_new_ones_for_later(rig: Rig) -> None:
    rig.fake.pause()
    running = asyncio.create_task(rig.reply(msg("slow one", mid="1")))
    await rig.fake.wait_for_requests(1)
    stopping = asyncio.create_task(rig.processor.shutdown(5.0))
    await asyncio.sleep(0)  # let shutdown mark the processor closing (no timing involved)
    assert not stopping.done()

    with pytest.raises(ShuttingDown):  # accepted, to be answered after the restart
        await rig.reply(msg("late", chat="2", mid="2"))
    with pytest.raises(TryLater) as later:  # HTTP says 503 with Retry-After
        await rig.answer(msg("late too", chat="2", mid="3"))
    assert later.value.retry_after_s == 10.0
    rig.fake.resume()
    assert await asyncio.wait_for(running, 10) == "echo: [Alice]: slow one"
    assert await asyncio.wait_for(stopping, 10) == 0  # nothing had to be cancelled
    assert rig.fake.total_requests == 1
    assert await rig.storage.recent_turns("telegram", "2", 10) == []
    kept = await rig.storage.intake.listing("pending")
    assert sorted(e.text for e in kept) == ["late", "late too"]
    assert [t.role for t in await rig.storage.recent_turns("telegram", "1", 10)] == [
        "user",
        "assistant",
    ]


async def test_shutdown_cancels_a_turn_that_outlives_the_timeout(rig: Rig) -> None:
    rig.fake.hang()
    running = asyncio.create_task(rig.reply(msg("never answered", mid="1")))
    await rig.fake.wait_for_requests(1)
    assert await rig.processor.shutdown(0.05) == 1
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_recovery_leaves_a_message_answered_since_its_snapshot_alone(
    storage: SqlStorage, tmp_path: Path
) -> None:
    """The sweep read the row while it was pending; by the time recovery gets the chat,
    the live path has answered it. Nothing is fetched, asked or sent again."""
    outlet = RecordingOutlet()
    reads: list[InboundMessage] = []

    async def read_images(message: InboundMessage) -> ImageNotes:
        reads.append(message)
        return ImageNotes(notes=["a cat"])

    async with build_rig(storage, tmp_path, read_images=read_images) as rig:
        rig.app.routes.add(outlet)
        processor = rig.processor
        image = ImageRef(fetch=_never_fetched, locator="file-1")
        assert await processor.handle(msg("look", mid="9", images=(image,))) is None
        entry = await rig.storage.intake.by_message("telegram", "1", "9")
        assert entry is not None and entry.state == "delivered"
        stale = replace(entry, state="pending", user_turn_id=None, reply_turn_id=None)
        assert await processor.resume(stale) is False
        assert (len(reads), rig.fake.total_requests, len(outlet.sent)) == (1, 1, 1)


async def _never_fetched() -> bytes:
    raise AssertionError("the reader in this test does not fetch")


async def test_configured_message_suffix_reaches_the_stored_turn_and_the_model(
    tmp_path: Path, database_url: str, storage: SqlStorage
) -> None:
    """`[context] message_suffix` from the config, through the daemon's own wiring."""
    suffix = "(You can look things up with [Search: words].)"
    async with FakeOpenAI(reply="ok") as fake:
        settings = settings_for(tmp_path, database_url, fake, context={"message_suffix": suffix})
        async with daemon(settings) as app:
            assert app.processor is not None
            waiting = Waiting()
            app.routes.add(waiting)
            sent = await waiting.ask(app.processor.handle, msg("hello", mid="1"))
            assert [m.text for m in sent] == ["ok"]
    expected = f"[Alice]: hello\n{suffix}"
    assert fake.requests[0]["messages"][-1] == {"role": "user", "content": expected}
    stored = await storage.recent_turns("telegram", "1", 10)
    assert [(t.role, t.content) for t in stored] == [("user", expected), ("assistant", "ok")]
