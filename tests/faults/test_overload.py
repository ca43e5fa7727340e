"""Issue 24 item 2: two real `chatterd run` replicas on one PostgreSQL, under a burst.

The replicas are sized to fit the server (`[storage] replicas`, `pool_size`,
`[bot] max_in_flight`) and given a small waiting line (`[bot] max_waiting`), so the
burst overloads them on purpose. Every HTTP client is either answered (its own answer,
once) or told to come back (503 + Retry-After, nothing stored), and comes back; every QQ
message is answered exactly once, those that arrived during the overload by recovery.
And replicas that cannot fit the server refuse to start, in one line.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from memory.db.migrate import Database, parse_url
from memory.turns.intake import IntakeStore
from tests.fakes.onebot_impl import FakeOneBot, sent_text
from tests.fakes.openai_server import FakeOpenAI, last_user_text
from tests.faults.daemon import ROOT, Daemon, daemon_env, free_port

pytestmark = pytest.mark.faults

HTTP_CLIENTS = 160  # 80 at each replica, all at once
QQ_PEOPLE = 40  # all at once, on the replica the QQ account is linked to
SIZING = {
    "CHATTERD_STORAGE__REPLICAS": "2",
    "CHATTERD_STORAGE__POOL_SIZE": "4",
    "CHATTERD_BOT__MAX_IN_FLIGHT": "6",
    "CHATTERD_BOT__MAX_WAITING": "10",
    "CHATTERD_BOT__RATE_LIMIT_PER_MIN": "0",
}
BURST_LIMIT_S = 120.0  # everything must be settled well within this


def answer_by_name(body: dict[str, Any]) -> str:
    said = last_user_text(body) or ""
    return f"answer to {said.split(']:')[0].lstrip('[')}"


def _postgres_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("replicas share a PostgreSQL database")


# served by conftest.py's `model` fixture
FAKE_CHAT = {
    "reply": answer_by_name,
    "latency_s": 0.05,
    "model": "fake-model",
}


async def test_replicas_that_cannot_fit_the_server_refuse_to_start(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    _postgres_only(database_url)
    env = daemon_env(
        tmp_path,
        storage_url=database_url,
        model_url=model.base_url,
        http_port=free_port(),
        extra={"CHATTERD_STORAGE__REPLICAS": "7"},  # 7 x 15 against max_connections 100
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "run",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(ROOT),
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, err.decode()
    last = err.decode().strip().splitlines()[-1]
    assert last.startswith("chatterd: storage: 7 replica(s) x 15 connections"), last
    assert "max_connections" in last and "[storage] pool_size" in last
    assert "Traceback" not in err.decode()


async def test_a_second_replica_that_forgot_the_replicas_setting_refuses_to_start(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    """Issue 35.4: `[storage] replicas` left at 1 on both. The first replica fits the
    server alone; the second sees the first's sessions, counts two, does not fit, and
    stops in one line before accepting anything. The first keeps answering."""
    _postgres_only(database_url)
    usable = await _usable_connections(database_url)
    # One replica takes a little over half of what the server allows.
    sizing = {"CHATTERD_STORAGE__POOL_SIZE": str(usable // 2 + 2)}
    first_env = daemon_env(
        tmp_path, storage_url=database_url, model_url=model.base_url,
        http_port=free_port(), extra=sizing,
    )  # fmt: skip
    first = Daemon(first_env, tmp_path / "first.log", int(first_env["CHATTERD_HTTP__PORT"]))
    try:
        await first.start(within_s=90)
        second_env = {**first_env, "CHATTERD_HTTP__PORT": str(free_port())}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "run",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=second_env, cwd=str(ROOT),
        )  # fmt: skip
        _, err = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode == 2, err.decode()
        last = err.decode().strip().splitlines()[-1]
        assert last.startswith("chatterd: storage: 2 replica(s) (1 other replica(s)"), last
        assert "Traceback" not in err.decode()
        body = {"user_id": "u1", "chat_type": "private", "text": "still there?"}
        status, answer = await first.post_chat(body)
        assert status == 200 and answer["reply"] == "answer to u1"
    finally:
        await first.close()


async def _usable_connections(database_url: str) -> int:
    from memory.db.capacity import server_limit

    database = Database(parse_url(database_url), pool_size=1)
    try:
        return (await server_limit(database)).usable
    finally:
        await database.close()


class Burst:
    """Counts what every HTTP client saw."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {}
        self.told_to_come_back = 0
        self.other: list[tuple[int, Any]] = []

    async def client(self, session: aiohttp.ClientSession, base: str, n: int) -> None:
        name = f"h{n}"
        body = {
            "user_id": name,
            "chat_type": "private",
            "sender_name": name,
            "text": f"hello from {name}",
            "message_id": f"m{n}",
        }
        for _ in range(60):  # bounded: 60 tries of at most a few seconds each
            async with session.post(f"{base}/v1/chat", json=body) as response:
                answer = await response.json()
                if response.status == 503:
                    self.told_to_come_back += 1
                    await asyncio.sleep(float(response.headers["Retry-After"]))
                    continue
                if response.status != 200:
                    self.other.append((response.status, answer))
                    return
                self.answers.setdefault(name, []).append(answer["reply"])
                return
        self.other.append((0, f"{name} never accepted"))


async def test_two_replicas_under_a_burst_answer_each_message_once(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    _postgres_only(database_url)
    onebot_port = free_port()
    daemons: list[Daemon] = []
    impl = FakeOneBot()
    try:
        for index in range(2):
            extra = dict(SIZING)
            if index == 0:  # the QQ account is linked to the first replica
                extra |= {
                    "CHATTERD_ONEBOT__ENABLED": "true",
                    "CHATTERD_ONEBOT__PORT": str(onebot_port),
                    "CHATTERD_ONEBOT__SEND_INTERVAL_S": "0",
                }
            env = daemon_env(
                tmp_path,
                storage_url=database_url,
                model_url=model.base_url,
                http_port=free_port(),
                extra=extra,
            )
            log = tmp_path / f"replica-{index}.log"
            daemon = Daemon(env, log, int(env["CHATTERD_HTTP__PORT"]))
            daemons.append(daemon)
            await daemon.start(within_s=90)  # two daemons starting on a busy machine
        link = await impl.connect_reverse(f"ws://127.0.0.1:{onebot_port}/onebot/v11/ws")

        burst = Burst()
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            clients = [
                burst.client(session, daemons[n % 2].base_url, n) for n in range(HTTP_CLIENTS)
            ]
            qq = [
                link.send_event(
                    impl.private_message(
                        f"hello from q{n}", user_id=50_000 + n, nickname=f"q{n}", message_id=n + 1
                    )
                )
                for n in range(QQ_PEOPLE)
            ]
            await asyncio.wait_for(asyncio.gather(*qq, *clients), BURST_LIMIT_S)
        await impl.wait_sent(QQ_PEOPLE, limit_s=BURST_LIMIT_S)
        for daemon in daemons:
            await settled(daemon)

        # HTTP: every client got its own answer, once; the overload told some to come back.
        assert burst.other == []
        assert {name: replies for name, replies in burst.answers.items()} == {
            f"h{n}": [f"answer to h{n}"] for n in range(HTTP_CLIENTS)
        }
        assert burst.told_to_come_back > 0, "the burst never overloaded a replica"
        # QQ: each person answered exactly once, with the answer to their own message.
        per_user = Counter(int(s["params"]["user_id"]) for s in impl.sent)
        assert per_user == Counter({50_000 + n: 1 for n in range(QQ_PEOPLE)})
        for entry in impl.sent:
            who = int(entry["params"]["user_id"]) - 50_000
            assert sent_text(entry) == f"answer to q{who}"
        logs = "\n".join(d.log() for d in daemons)
        assert "kept for recovery" in logs, "no QQ message arrived during the overload"
        assert "too many clients" not in logs and "Traceback" not in logs
        # The database agrees: each accepted message delivered once, nothing left open.
        states = await intake_states(database_url)
        assert states == Counter({"delivered": HTTP_CLIENTS + QQ_PEOPLE})
    finally:
        await impl.close()
        for daemon in daemons:
            await daemon.close()


async def settled(daemon: Daemon, within_s: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        turns = (await daemon.health())["turns"]
        if turns["pending"] == 0 and turns["answered_undelivered"] == 0:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not settled: {turns}\n{daemon.log()[-4000:]}")
        await asyncio.sleep(0.2)


async def intake_states(database_url: str) -> Counter[str]:
    database = Database(parse_url(database_url), pool_size=1)
    try:
        entries = await IntakeStore(database).listing(limit=10_000)
        return Counter(entry.state for entry in entries)
    finally:
        await database.close()
