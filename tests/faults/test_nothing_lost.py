"""Nothing accepted is lost: the real daemon killed at each step, then restarted.

Each case counts the messages accepted, answered, answered twice and lost, and asserts
0 lost and 0 twice. The daemon is `chatterd run` in a child process; Telegram, OneBot
and the model are fakes on loopback in this process. Runs on SQLite, and on PostgreSQL
when CHATTERD_TEST_DATABASE_URL is set (the replica cases need PostgreSQL).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from channels.formatting.telegram import render_telegram
from memory.db.migrate import Database, parse_url
from memory.turns.intake import IntakeStore
from tests.fakes.onebot_impl import HOLD, FakeOneBot
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.fakes.openai_stream import StreamShape
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.faults.daemon import TWO_REPLICAS, Blackhole, Daemon, daemon_env, free_port

pytestmark = pytest.mark.faults

PEOPLE = [user(2001 + i, name) for i, name in enumerate(["Ann", "Bo", "Cy", "Di"])]


def answer_by_name(body: dict[str, Any]) -> str:
    """The model answers each person by name, so a reply shows whose message it answers."""
    said = last_user_text(body) or ""
    return f"answer to {said.split(']:')[0].lstrip('[')}"


class Harness:
    """One test's fakes, database and daemons."""

    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.tmp_path = tmp_path
        self.database_url = database_url
        self.model = FakeOpenAI(reply=answer_by_name)
        self.tg = FakeTelegram()
        self.daemons: list[Daemon] = []

    async def __aenter__(self) -> Harness:
        await self.model.start()
        await self.tg.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for daemon in self.daemons:
            await daemon.close()
        self.model.resume()
        self.tg.release_sends()
        await self.tg.__aexit__()
        await self.model.close()

    def env(self, extra: dict[str, str] | None = None, model_url: str | None = None) -> dict:
        port = free_port()
        env = daemon_env(
            self.tmp_path,
            storage_url=self.database_url,
            model_url=model_url or self.model.base_url,
            http_port=port,
            extra={
                "CHATTERD_TELEGRAM__ENABLED": "true",
                "CHATTERD_TELEGRAM__TOKEN": self.tg.token,
                "CHATTERD_TELEGRAM__API_BASE_URL": self.tg.root,
                **(extra or {}),
            },
        )
        return env

    async def daemon(self, extra: dict[str, str] | None = None, **kw: Any) -> Daemon:
        env = self.env(extra, **kw)
        log = self.tmp_path / f"daemon-{len(self.daemons)}.log"
        daemon = Daemon(env, log, int(env["CHATTERD_HTTP__PORT"]))
        self.daemons.append(daemon)
        return await daemon.start()

    async def sigterm_mid_turn(self, extra: dict[str, str]) -> Daemon:
        """A daemon with one Telegram turn waiting on the model, then sent SIGTERM."""
        daemon = await self.daemon(extra)
        self.model.pause()
        self.say(PEOPLE[0])
        await self.model.wait_for_requests(1, timeout_s=15)
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGTERM)
        return daemon

    def say(self, who: dict[str, Any], words: str = "hello", **fields: Any) -> dict:
        return self.tg.push_message(private_chat(who), who, words, **fields)

    def replies(self) -> Counter[int]:
        """Delivered sendMessage calls per chat."""
        return Counter(int(sent["chat_id"]) for sent in self.tg.sent)

    async def settled(self, daemon: Daemon, within_s: float = 20.0) -> dict[str, Any]:
        """Wait until no accepted message is pending or undelivered."""
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            turns = (await daemon.health())["turns"]
            if turns["pending"] == 0 and turns["answered_undelivered"] == 0:
                return dict(turns)
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"not settled: {turns}\n{daemon.log()}")
            await asyncio.sleep(0.1)

    def assert_each_answered_once(self, people: list[dict[str, Any]]) -> None:
        counts = self.replies()
        lost = [p["first_name"] for p in people if counts[p["id"]] == 0]
        twice = [p["first_name"] for p in people if counts[p["id"]] > 1]
        assert (lost, twice) == ([], []), f"lost {lost}, answered twice {twice}: {counts}"
        for person in people:
            texts = [s["text"] for s in self.tg.sent if int(s["chat_id"]) == person["id"]]
            assert texts == [f"answer to {person['first_name']}"]

    async def states(self) -> Counter[str]:
        database = Database(parse_url(self.database_url))
        try:
            return Counter(e.state for e in await IntakeStore(database).listing(limit=1000))
        finally:
            await database.close()


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


async def test_sigkill_during_the_model_call(harness: Harness) -> None:
    """The issue's story: four people wrote, the daemon died while the model worked."""
    first = await harness.daemon()
    harness.model.pause()
    for person in PEOPLE:
        harness.say(person)
    await harness.model.wait_for_requests(len(PEOPLE), timeout_s=15)
    first.kill()
    await first.wait()
    assert harness.replies() == Counter()
    harness.model.resume()
    second = await harness.daemon()
    turns = await harness.settled(second)
    harness.assert_each_answered_once(PEOPLE)
    # A chat's rows are counted when its turn has let go of the chat, a moment after
    # their delivery is stored: wait for the count rather than read it once.
    deadline = asyncio.get_running_loop().time() + 5.0
    while turns["recovered_total"] < len(PEOPLE) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
        turns = (await second.health())["turns"]
    assert turns["recovered_total"] == len(PEOPLE), turns
    (endpoint,) = (await second.health())["models"]["llm"]  # /healthz names the endpoint
    assert endpoint["state"] == "ok" and "sk-fault-test" not in str(endpoint)
    assert (await harness.states())["delivered"] == len(PEOPLE)


async def test_sigkill_in_the_middle_of_a_burst(harness: Harness) -> None:
    """Two messages of one burst accepted, the process killed while it waited for more:
    after the restart both are answered, together, by one reply, once."""
    extra = {"CHATTERD_PRIVATE__BURST_MS": "30000", "CHATTERD_PRIVATE__BURST_MAX_MS": "60000"}
    first = await harness.daemon(extra)
    ann = PEOPLE[0]
    harness.say(ann, "first half")
    harness.say(ann, "second half")
    await _until(lambda: harness.states(), lambda s: s["pending"] == 2)
    first.kill()
    await first.wait()
    assert harness.replies() == Counter() and harness.model.requests == []
    second = await harness.daemon(extra)
    await harness.settled(second)
    harness.assert_each_answered_once([ann])
    (asked,) = harness.model.requests
    said = last_user_text(asked.json or {}) or ""
    assert 0 <= said.find("first half") < said.find("second half"), said
    assert (await harness.states())["delivered"] == 2


async def test_sigkill_in_a_group_burst_started_by_the_wake_word(harness: Harness) -> None:
    """A wake word, then the same sender's two plain lines (another member's line between):
    killed while the burst waited; after the restart the three are one reply, once, and
    the other member's line is answered by nothing."""
    extra = {
        "CHATTERD_GROUPS__BURST_MS": "30000",
        "CHATTERD_GROUPS__BURST_MAX_MS": "60000",
        "CHATTERD_GROUPS__WAKE_WORDS": '["chatterbot"]',
    }
    first = await harness.daemon(extra)
    ann, bo = PEOPLE[0], PEOPLE[1]
    group = group_chat(-100555, "Trip")
    harness.tg.push_message(group, ann, "chatterbot, got a minute?")
    harness.tg.push_message(group, ann, "we are planning a trip")
    harness.tg.push_message(group, bo, "I can't come")
    harness.tg.push_message(group, ann, "where should we go?")
    await _until(lambda: harness.states(), lambda s: s["pending"] == 3)
    first.kill()
    await first.wait()
    assert harness.tg.sent == [] and harness.model.requests == []
    second = await harness.daemon(extra)
    await harness.settled(second)
    (asked,) = harness.model.requests
    said = last_user_text(asked.json or {}) or ""
    lines = ["got a minute?", "planning a trip", "where should we go?"]
    places = [said.find(line) for line in lines]
    assert -1 not in places and places == sorted(places) and "I can't come" not in said, said
    assert [int(s["chat_id"]) for s in harness.tg.sent] == [group["id"]]
    assert await harness.states() == {"delivered": 3}  # no row left to answer again


async def test_sigkill_during_the_image_description(harness: Harness, tmp_path: Path) -> None:
    async with FakeOpenAI(reply="a red bicycle") as vision:
        extra = {
            "CHATTERD_VISION__ENABLED": "true",
            "CHATTERD_VISION__BASE_URL": vision.base_url,
            "CHATTERD_VISION__API_KEY": "sk-vision",
        }
        first = await harness.daemon(extra)
        vision.pause()
        ann = PEOPLE[0]
        photo = harness.tg.add_photo(_tiny_png())
        harness.tg.push_message(private_chat(ann), ann, None, photo=photo, caption="look")
        await vision.wait_for_requests(1, timeout_s=15)
        first.kill()
        await first.wait()
        vision.resume()
        second = await harness.daemon(extra)
        await harness.settled(second)
        harness.assert_each_answered_once([ann])
        described = [r for r in harness.model.requests if "red bicycle" in str(r.get("messages"))]
        assert described, "the recovered turn was answered with the image described"


async def test_sigkill_during_a_search(harness: Harness) -> None:
    def search_first(body: dict[str, Any]) -> str:
        if "<search_results" in str(body["messages"][-1]):  # the observation came back
            first_user = next(m for m in body["messages"] if m["role"] == "user")
            return answer_by_name({"messages": [first_user]})
        return "[Search: weather in Oslo]"

    async with Blackhole() as proxy:
        extra = {"DDGS_PROXY": proxy.url, "CHATTERD_TOOLS__SEARCH_TIMEOUT_S": "1"}
        harness.model.set_default(search_first)
        first = await harness.daemon(extra)
        harness.say(PEOPLE[1])
        await asyncio.wait_for(proxy.connected.wait(), 15)
        first.kill()
        await first.wait()
        harness.model.set_default(answer_by_name)
        second = await harness.daemon(extra)
        await harness.settled(second)
        harness.assert_each_answered_once([PEOPLE[1]])


async def test_sigkill_after_the_reply_is_stored_before_it_is_sent(harness: Harness) -> None:
    """Telegram refused the send (502); the process died before trying again."""
    first = await harness.daemon({"CHATTERD_BOT__RECOVERY_INTERVAL_S": "60"})
    harness.tg.fail("sendMessage", 502, times=10)
    harness.say(PEOPLE[2])
    await harness.tg.wait_for("sendMessage", 3, within_s=20)  # the sender's own retries
    await _until(lambda: harness.states(), lambda s: s["answered"] == 1)
    first.kill()
    await first.wait()
    harness.tg._failures.clear()
    second = await harness.daemon()
    await harness.settled(second)
    harness.assert_each_answered_once([PEOPLE[2]])
    assert len(harness.model.requests) == 1  # delivered again, not answered again


async def test_sigkill_during_a_slow_send(harness: Harness) -> None:
    first = await harness.daemon()
    harness.tg.hold_sends()
    harness.say(PEOPLE[3])
    await harness.tg.wait_for("sendMessage", 1, within_s=15)  # at the platform's door
    first.kill()
    await first.wait()
    harness.tg.release_sends()  # the platform never accepted it: its sender is gone
    second = await harness.daemon()
    await harness.settled(second)
    harness.assert_each_answered_once([PEOPLE[3]])


async def test_sigterm_whose_drain_times_out(harness: Harness) -> None:
    extra = {"CHATTERD_BOT__SHUTDOWN_GRACE_S": "2"}
    first = await harness.sigterm_mid_turn(extra)
    harness.say(PEOPLE[1])  # arrives during the drain: stored, not told "restarting"
    await _until(lambda: harness.states(), lambda s: s["pending"] == 2)
    assert await first.wait() == 0
    assert harness.replies() == Counter()
    harness.model.resume()
    second = await harness.daemon(extra)
    await harness.settled(second)
    harness.assert_each_answered_once(PEOPLE[:2])


async def test_http_retry_with_the_same_message_id_is_answered_once(harness: Harness) -> None:
    daemon = await harness.daemon()
    harness.model.pause()
    body = {"user_id": "u1", "chat_type": "private", "text": "hi", "message_id": "m-1"}
    with pytest.raises(asyncio.TimeoutError):  # the caller gives up...
        await daemon.post_chat(body, within_s=1.0)
    retry = asyncio.create_task(daemon.post_chat(body))  # ...and retries the same message
    harness.model.resume()
    status, answer = await retry
    assert status == 200 and answer["reply"] == "answer to u1"
    assert len(harness.model.requests) == 1
    status, again = await daemon.post_chat(body)  # a late third try: the stored reply
    assert (status, again["reply"]) == (200, "answer to u1")
    assert len(harness.model.requests) == 1


async def test_http_during_the_drain_gets_503_and_the_retry_is_answered(
    harness: Harness,
) -> None:
    extra = {"CHATTERD_BOT__SHUTDOWN_GRACE_S": "3"}
    first = await harness.sigterm_mid_turn(extra)
    body = {"user_id": "u2", "chat_type": "private", "text": "hi", "message_id": "m-2"}
    status, answer = await first.post_chat(body)
    assert status == 503 and "error" in answer
    await first.wait()
    harness.model.resume()
    second = await harness.daemon(extra)
    status, answer = await second.post_chat(body)
    assert (status, answer["reply"]) == (200, "answer to u2")
    await harness.settled(second)
    assert sum(1 for r in harness.model.requests if "[u2]" in str(r.get("messages"))) == 1


async def test_onebot_link_dropped_while_the_reply_is_sent(harness: Harness) -> None:
    port = free_port()
    extra = {
        "CHATTERD_ONEBOT__ENABLED": "true",
        "CHATTERD_ONEBOT__PORT": str(port),
        "CHATTERD_TELEGRAM__ENABLED": "false",
    }
    daemon = await harness.daemon(extra)
    impl = FakeOneBot()
    url = f"ws://127.0.0.1:{port}/onebot/v11/ws"
    link = await impl.connect_reverse(url)
    dropped = asyncio.Event()

    def drop_link(params: dict[str, Any]) -> Any:
        asyncio.get_running_loop().create_task(link.close())
        dropped.set()
        return HOLD

    impl.responders["send_private_msg"] = drop_link
    await link.send_event(impl.private_message("hello", user_id=777, nickname="Eve"))
    await asyncio.wait_for(dropped.wait(), 15)
    await link.wait_closed()
    impl.responders["send_private_msg"] = impl._sent
    await impl.connect_reverse(url)
    sent = await impl.wait_sent(1, limit_s=15)
    await harness.settled(daemon)
    assert [s["params"]["user_id"] for s in impl.sent] == [777]
    assert "answer to Eve" in str(sent[0]["params"]["message"])
    await impl.close()


def _postgres_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("replicas share a PostgreSQL database")


async def test_a_dead_replicas_turn_is_answered_by_the_other(
    harness: Harness, database_url: str
) -> None:
    _postgres_only(database_url)
    async with FakeOpenAI(reply=answer_by_name) as other_model:
        a = await harness.daemon(TWO_REPLICAS)
        harness.model.pause()
        harness.say(PEOPLE[0])
        await harness.model.wait_for_requests(1, timeout_s=15)
        b = await harness.daemon(TWO_REPLICAS, model_url=other_model.base_url)
        a.kill()
        await a.wait()
        await harness.settled(b)
        harness.assert_each_answered_once([PEOPLE[0]])
        assert len(other_model.requests) == 1


async def test_postgres_connections_cut_mid_turn(harness: Harness, database_url: str) -> None:
    _postgres_only(database_url)
    daemon = await harness.daemon()
    harness.model.pause()
    harness.say(PEOPLE[1])
    await harness.model.wait_for_requests(1, timeout_s=15)
    cut = await _terminate_backends(database_url)
    assert cut > 0
    harness.model.resume()
    await harness.settled(daemon)
    harness.assert_each_answered_once([PEOPLE[1]])
    assert (await harness.states())["delivered"] == 1


async def _terminate_backends(database_url: str) -> int:
    target = parse_url(database_url)
    name = f"chatterd/{target.search_path or 'public'}"
    engine = create_async_engine(target.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            result = await conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE (application_name = :name OR application_name LIKE :name || '/%') "
                    "AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            return int(result.scalar_one())
    finally:
        await engine.dispose()


async def _until(read: Callable[[], Any], ok: Callable[[Any], bool], within_s: float = 15) -> Any:
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        value = await read()
        if ok(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not reached: {value}")
        await asyncio.sleep(0.05)


def _tiny_png() -> bytes:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


if os.name != "posix":  # pragma: no cover
    pytest.skip("signals", allow_module_level=True)


async def test_sigkill_mid_stream_in_a_group_completes_the_same_message(
    harness: Harness,
) -> None:
    """A group answer is one message edited as it grows; killed mid-stream, the restarted
    daemon finishes that same message (one edit to the full text), never a second copy."""
    long_answer = "This answer grows slowly, word by word, " + "and on and on " * 20 + "done."
    harness.model.set_default(lambda body: long_answer)
    harness.model.stream_shape = StreamShape(piece_chars=6, delay_s=0.1)
    stream_env = {"CHATTERD_TELEGRAM__STREAM_INTERVAL_S": "0.3"}
    first = await harness.daemon(stream_env)
    group = group_chat(-100900, "Fault club")
    words = "@chatterd_test_bot tell me a long story"
    question = harness.tg.push_message(
        group, PEOPLE[0], words, entities=[entity("mention", words, "@chatterd_test_bot")]
    )
    await harness.tg.wait_for("editMessageText", 1, within_s=20)  # the preview is growing
    first.kill()
    await first.wait()
    (preview,) = harness.tg.visible(group["id"])
    assert preview["text"] != render_telegram(long_answer).text  # cut off mid-answer

    harness.model.stream_shape = StreamShape()
    second = await harness.daemon(stream_env)
    await harness.settled(second)

    sends = [c for c in harness.tg.calls_of("sendMessage") if c.params["chat_id"] == group["id"]]
    assert len(sends) == 1, "the restarted daemon sent a second copy"
    assert sends[0].params["reply_parameters"]["message_id"] == question["message_id"]
    (shown,) = harness.tg.visible(group["id"])
    assert shown["message_id"] == preview["message_id"]
    assert shown["text"] == render_telegram(long_answer).text
    assert (await harness.states())["delivered"] == 1
