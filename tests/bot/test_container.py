"""The container image, built and run for real with Podman (marked `container`).

Why a real image: the promises of the Containerfile (not root, data on the volumes,
migrations at start, /healthz as the health check, config from CHATTERD_* variables)
only hold in a built image running under a container engine; nothing else checks them.

No container registry is reachable here, so `.ci/run` bootstraps a Debian base with
mmdebstrap and imports it (`localhost/debian-py:bookworm`); the build swaps it in through
`BASE_IMAGE`. The build and run flags below are what Podman needs on these machines (runc,
bounded ulimits, host networking, the host's CA bundle and pip configuration because
PyPI is reached through a proxy with its own certificate).

The daemon in the container talks to this machine's PostgreSQL (a database of its own)
and to a fake model served by this test, both on the host's loopback (host network); one
test uses Podman's own bridge network to check what a published port reaches.
Run: `.venv/bin/python -m pytest -q -rs -m container tests/bot/test_container.py`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.openai_server import FakeOpenAI, echo_last_user

# The module's image fixture runs in the first test's setup: a build may take up to its own
# 1,800 s bound, past the suite's default per-test timeout.
pytestmark = [pytest.mark.container, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
BASE_ENV = "CHATTERD_CONTAINER_BASE"  # the BASE_IMAGE to build on (must be local)
DEFAULT_BASE = "localhost/debian-py:bookworm"
IMAGE = "localhost/chatterd:container-test"
PG = ("127.0.0.1", 5432)


def _engine_flags() -> list[str]:
    """The flags `podman build` and `podman run` need on these machines (see module doc)."""
    flags = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--network", "host"]
    if Path("/usr/sbin/runc").exists():
        flags[:0] = ["--runtime", "/usr/sbin/runc"]
    return flags


def _build_mounts() -> list[str]:
    mounts = []
    for path in ("/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf"):
        if Path(path).is_file():
            mounts += ["-v", f"{path}:{path}:ro"]
    return mounts


def _podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


def _reachable(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=2).close()
    except OSError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def image() -> str:
    """Build the image from the Containerfile on the local base (skipped, saying why)."""
    if shutil.which("podman") is None:
        pytest.skip("CONTAINER TEST SKIPPED: podman is not installed (.ci/run installs it)")
    base = os.environ.get(BASE_ENV, DEFAULT_BASE)
    if _podman("image", "exists", base, check=False).returncode != 0:
        pytest.skip(
            f"CONTAINER TEST SKIPPED: base image {base} is not present; "
            "bootstrap it as .ci/run does (mmdebstrap + podman import)"
        )
    if not _reachable(PG):
        pytest.skip("CONTAINER TEST SKIPPED: no PostgreSQL on 127.0.0.1:5432")
    build = subprocess.run(
        ["podman", "build", "--format", "docker", *_engine_flags(), *_build_mounts(),
         "--build-arg", f"BASE_IMAGE={base}", "-t", IMAGE, "-f", "Containerfile", "."],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert build.returncode == 0, f"podman build failed:\n{build.stdout[-4000:]}{build.stderr}"
    return IMAGE


@pytest.fixture
def database() -> Iterator[str]:
    """A PostgreSQL database of this test's own, dropped afterwards."""
    name = f"chatterd_ctr_{uuid.uuid4().hex[:10]}"
    _psql(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        _psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _psql(statement: str) -> None:
    async def run() -> None:
        import asyncpg

        connection = await asyncpg.connect(host=PG[0], port=PG[1], user="postgres")
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


@pytest.fixture
def volumes() -> Iterator[dict[str, str]]:
    """Named volumes for /data and /workspace, as compose makes them."""
    tag = uuid.uuid4().hex[:10]
    names = {"/data": f"chatterd-test-data-{tag}", "/workspace": f"chatterd-test-ws-{tag}"}
    yield names
    _podman("volume", "rm", "-f", *names.values(), check=False)


# served by conftest.py's `model` fixture
FAKE_CHAT = {
    "reply": echo_last_user,
    "model": "fake-model",
}


class Container:
    """One `podman run -d` of the image; `replace()` is `compose down && up` for it."""

    def __init__(self, image: str, env: dict[str, str], volumes: dict[str, str]) -> None:
        self.image, self.env, self.volumes = image, env, volumes
        self.name = f"chatterd-test-{uuid.uuid4().hex[:10]}"
        self.port = int(env["CHATTERD_HTTP__PORT"])

    async def start(self) -> None:
        args = ["run", "-d", "--name", self.name, *_engine_flags()]
        for target, volume in self.volumes.items():
            args += ["-v", f"{volume}:{target}"]
        for key, value in self.env.items():
            args += ["-e", f"{key}={value}"]
        await _podman_async(*args, self.image)
        await self._wait_healthy()

    async def remove(self) -> None:
        """Stop (SIGTERM, the daemon drains) and delete the container; volumes stay."""
        await _podman_async("stop", "-t", "30", self.name, check=False)
        await _podman_async("rm", "-f", self.name, check=False)

    async def _wait_healthy(self, within_s: float = 90.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        async with aiohttp.ClientSession() as session:
            while True:
                state = await _podman_async("inspect", "-f", "{{.State.Status}}", self.name)
                if state.strip() != "running":
                    raise AssertionError(f"container {state.strip()}:\n{await self.logs()}")
                try:
                    async with session.get(self.url("/healthz")) as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if loop.time() > deadline:
                    raise AssertionError(f"no /healthz in {within_s}s:\n{await self.logs()}")
                await asyncio.sleep(0.2)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def chat(self, text: str) -> dict[str, Any]:
        body = {"user_id": "ann", "chat_type": "private", "sender_name": "Ann", "text": text}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            async with session.post(self.url("/v1/chat"), json=body) as response:
                assert response.status == 200, await response.text()
                return dict(await response.json())

    async def logs(self) -> str:
        return await _podman_async("logs", self.name, check=False)

    async def main_process_uid(self) -> int:
        """The daemon's real uid, read from the host's /proc (no trust in the image)."""
        pid = (await _podman_async("inspect", "-f", "{{.State.Pid}}", self.name)).strip()
        status = await asyncio.to_thread(Path(f"/proc/{pid}/status").read_text)
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        return int(uid_line.split()[1])


async def _podman_async(*args: str, check: bool = True) -> str:
    proc = await asyncio.create_subprocess_exec(
        "podman", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:2])} failed: {err.decode()[-2000:]}")
    return out.decode()


def _env(storage_url: str | None, model: FakeOpenAI) -> dict[str, str]:
    env = {
        "CHATTERD_LLM__BASE_URL": model.base_url,
        "CHATTERD_LLM__API_KEY": "sk-container-test",
        "CHATTERD_LLM__MODEL": "fake-model",
        "CHATTERD_LLM__MAX_RETRIES": "0",
        "CHATTERD_HTTP__PORT": str(_free_port()),
        "CHATTERD_CONTEXT__COMPACTION": "false",
    }
    if storage_url is not None:
        env["CHATTERD_STORAGE__URL"] = storage_url
    return env


async def test_image_answers_keeps_the_conversation_and_is_not_root(
    image: str, database: str, volumes: dict[str, str], model: FakeOpenAI
) -> None:
    container = Container(image, _env(database, model), volumes)
    await container.start()
    try:
        assert await container.main_process_uid() != 0
        # The image's HEALTHCHECK command itself (exit 0 = healthy).
        await _podman_async("healthcheck", "run", container.name)
        first = await container.chat("my cat is called Pixel")
        assert "my cat is called Pixel" in first["reply"]  # the fake model echoes
    finally:
        await container.remove()

    # A new container on the same database and volumes: `compose down && up`.
    again = Container(image, container.env, volumes)
    await again.start()
    try:
        seen_before = len(model.requests)
        await again.chat("what is my cat called?")
        prompt = " ".join(str(m.get("content")) for m in model.requests[seen_before]["messages"])
        assert "my cat is called Pixel" in prompt, "the conversation did not survive"
    finally:
        await again.remove()


async def test_default_storage_lands_on_the_data_volume(
    image: str, volumes: dict[str, str], model: FakeOpenAI
) -> None:
    """No storage URL, no config file: SQLite and the workspace go to the volumes."""
    container = Container(image, _env(None, model), volumes)
    await container.start()
    try:
        await container.chat("hello")
        data = await _podman_async("exec", container.name, "ls", "/data", "/workspace")
    finally:
        await container.remove()
    assert "chatterd.sqlite" in data
    assert "AGENTS.md" in data or "SOUL.md" in data, data


async def test_published_port_answers_only_when_configured_to_listen_beyond_loopback(
    image: str, model: FakeOpenAI
) -> None:
    """On the container's own network: [http] host decides, as compose.yaml sets it."""
    flags = [f for f in _engine_flags() if f not in ("--network", "host")]
    port = _free_port()
    base = ["run", "-d", *flags, "-p", f"127.0.0.1:{port}:8080", "-e", "OPENAI_API_KEY=sk-x"]
    answers = {}
    for host in ("", "0.0.0.0"):
        env = ["-e", f"CHATTERD_HTTP__HOST={host}"] if host else []
        name = (await _podman_async(*base, *env, image)).strip()
        try:
            await _wait_for_health_command(name)  # the daemon is up inside the container
            answers[host] = await _status(f"http://127.0.0.1:{port}/healthz")
        finally:
            await _podman_async("rm", "-f", name, check=False)
    assert answers == {"": None, "0.0.0.0": 200}


async def _wait_for_health_command(name: str, within_s: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        proc = await asyncio.create_subprocess_exec(
            "podman", "healthcheck", "run", name,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        if await proc.wait() == 0:
            return
        if loop.time() > deadline:
            raise AssertionError(f"unhealthy for {within_s}s:\n{await _podman_async('logs', name)}")
        await asyncio.sleep(0.5)


async def _status(url: str) -> int | None:
    """The HTTP status, or None when nothing answers behind the published port."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            async with session.get(url) as response:
                return response.status
    except (aiohttp.ClientError, TimeoutError):
        return None
