"""Issue 45: replicas at default settings on one PostgreSQL, as real `chatterd run`
processes over HTTP. Four replicas at defaults start and answer 200 chats x 3 messages
exactly once and in order per chat, each turn seeing every earlier reply, with at most
60 connections; a kill -9 of one of them loses nothing and answers nothing twice; no
message reaches the model twice (but the ones the killed replica was asking about)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.faults.daemon import Daemon, daemon_env, free_port
from tests.scale import bouncer
from tests.scale.load import (
    Connections,
    Load,
    chat_requests,
    echo,
    model_calls,
    said,
    stored_conversations,
    text_of,
    unseen_replies,
)

pytestmark = pytest.mark.faults

CHATS = 200
MESSAGES = 3
REPLICAS = 4
PEAK_LIMIT = 60  # 4 replicas x [storage] pool_size 15
LOAD_LIMIT_S = 240.0


def _postgres_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("replicas share a PostgreSQL database")


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(reply=echo, latency_s=0.2) as fake:
        yield fake


async def start_replicas(
    tmp_path: Path, storage_url: str, model: FakeOpenAI, count: int
) -> list[Daemon]:
    """`count` replicas at default settings (the rig's loopback fakes aside), started at
    once the way an operator scales out."""
    daemons = []
    for index in range(count):
        env = daemon_env(
            tmp_path, storage_url=storage_url, model_url=model.base_url, http_port=free_port()
        )
        log = tmp_path / f"replica-{index}.log"
        daemons.append(Daemon(env, log, int(env["CHATTERD_HTTP__PORT"])))
    await asyncio.gather(*(d.start(within_s=120) for d in daemons))
    return daemons


def expected_conversation(chat: int) -> list[str]:
    return [part for k in range(MESSAGES) for part in (text_of(chat, k), f"re {text_of(chat, k)}")]


async def check_answered_once_in_order(load: Load, database_url: str) -> None:
    assert load.failures == []
    assert load.answers == {
        c: [f"re {text_of(c, k)}" for k in range(MESSAGES)] for c in range(CHATS)
    }
    stored = await stored_conversations(database_url, CHATS)
    wrong = {c: turns for c, turns in stored.items() if turns != expected_conversation(c)}
    assert wrong == {}


async def test_four_replicas_at_defaults_answer_every_chat_once_and_in_order(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    _postgres_only(database_url)
    daemons: list[Daemon] = []
    try:
        async with Connections(database_url) as connections:
            daemons = await start_replicas(tmp_path, database_url, model, REPLICAS)
            load = Load(daemons, CHATS, MESSAGES)
            await load.run(LOAD_LIMIT_S)
        await check_answered_once_in_order(load, database_url)
        calls = model_calls(model)
        assert sorted(calls) == sorted(text_of(c, k) for c in range(CHATS) for k in range(MESSAGES))
        assert {text: n for text, n in calls.items() if n > 1} == {}  # the model asked once
        assert unseen_replies(model) == []
        assert connections.peak <= PEAK_LIMIT, connections.peak
        logs = "\n".join(d.log() for d in daemons)
        assert "Traceback" not in logs and "too many clients" not in logs
    finally:
        for daemon in daemons:
            await daemon.close()


async def test_a_replica_killed_mid_run_loses_nothing_and_answers_nothing_twice(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    _postgres_only(database_url)
    daemons: list[Daemon] = []
    try:
        daemons = await start_replicas(tmp_path, database_url, model, REPLICAS)
        load = Load(daemons, CHATS, MESSAGES, milestone=CHATS * MESSAGES // 3)
        running = asyncio.create_task(load.run(LOAD_LIMIT_S))
        await asyncio.wait_for(load.reached.wait(), LOAD_LIMIT_S)
        victim = daemons[0]
        killed_at = time.monotonic()
        victim.kill()
        await victim.wait()
        await running
        await check_answered_once_in_order(load, database_url)
        # A second model call only for a message the killed replica had asked about
        # and never heard back on; every other message reached the model once.
        first_call: dict[str, float] = {}
        for request in chat_requests(model):
            first_call.setdefault(said(request.json), request.at)
        twice = {text for text, n in model_calls(model).items() if n > 1}
        assert all(n <= 2 for n in model_calls(model).values())
        late = {text for text in twice if first_call[text] > killed_at}
        assert late == set()
        assert len(twice) <= 64  # at most the killed replica's turns in flight
        assert unseen_replies(model) == []
        # The kill landed mid-work: the others finished what the victim had accepted.
        healths = [await d.health() for d in daemons[1:]]
        assert sum(h["turns"]["recovered_total"] for h in healths) > 0
        logs = "\n".join(d.log() for d in daemons[1:])
        assert "Traceback" not in logs
    finally:
        for daemon in daemons:
            await daemon.close()


BOUNCED_CHATS = 100


async def test_two_replicas_behind_pgbouncer_answer_in_order_exactly_once(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    _postgres_only(database_url)
    if not bouncer.available():
        pytest.skip("pgbouncer is not installed (.ci/run installs Debian's)")
    daemons: list[Daemon] = []
    async with bouncer.pgbouncer(database_url) as bounced:
        try:
            daemons = await start_replicas(tmp_path, bounced, model, 2)
            load = Load(daemons, BOUNCED_CHATS, MESSAGES)
            await load.run(LOAD_LIMIT_S)
            assert load.failures == []
            assert load.answers == {
                c: [f"re {text_of(c, k)}" for k in range(MESSAGES)] for c in range(BOUNCED_CHATS)
            }
            stored = await stored_conversations(database_url, BOUNCED_CHATS)
            assert {c: t for c, t in stored.items() if t != expected_conversation(c)} == {}
            assert {text: n for text, n in model_calls(model).items() if n > 1} == {}
            assert unseen_replies(model) == []
            logs = "\n".join(d.log() for d in daemons)
            assert "Traceback" not in logs and "prepared statement" not in logs
        finally:
            for daemon in daemons:
                await daemon.close()
