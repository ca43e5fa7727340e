"""Each engine this machine can run, through the Sandbox service (the tool's handler):
no network, nothing of the host, limits that stop a run, one folder per chat.

Asserted on what the run printed and what the host saw: a loopback listener's accept
queue, the daemon's own environment, the chats' folders on disk, the wall clock.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.admins import Admins
from core.messages import OutboundMessage
from core.sandbox.bwrap import BwrapEngine
from core.sandbox.folders import ChatFolders
from core.sandbox.run import RunLimits
from core.sandbox.service import Sandbox, SandboxRules
from core.tools.registry import ToolContext
from tests.sandbox.support import ENGINES, PNG_CODE, ready

OWNER = "telegram:1000"


def ctx(chat: str = "1", user: str = "1000") -> ToolContext:
    return ToolContext.for_person("telegram", chat, user, "Op", None)


@pytest.fixture(params=ENGINES)
async def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sandbox]:
    engine = await ready(request.param, tmp_path / "chats")
    owner = engine.run_as if isinstance(engine, BwrapEngine) else None
    folders = ChatFolders(tmp_path / "chats", keep_hours=24, owner=owner)
    limits = RunLimits(timeout_s=6, memory_mb=256, max_output_chars=2000)
    rules = SandboxRules(allow="admins", admins=Admins(frozenset({OWNER})))
    box = Sandbox(engine, folders, limits, rules)
    box.sent = []  # type: ignore[attr-defined]

    async def send(message: OutboundMessage) -> bool:
        box.sent.append(message)  # type: ignore[attr-defined]
        return True

    box.attach(send)
    yield box


async def test_print_reaches_the_observation(sandbox: Sandbox) -> None:
    seen = await sandbox.run("print(6 * 7)", ctx())
    assert seen.ok and "stdout:\n42" in seen.text and "Exit status: 0" in seen.text


async def test_a_loopback_listener_sees_nothing(sandbox: Sandbox) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('CONNECTED')\n"
            "except Exception as exc:\n"
            "    print('refused', type(exc).__name__)\n"
        )
        seen = await sandbox.run(code, ctx())
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    assert "refused" in seen.text and "CONNECTED" not in seen.text


async def test_no_secret_of_the_daemon_reaches_a_run(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "sk-live-do-not-leak-4242"
    monkeypatch.setenv("CHATTERD_LLM__API_KEY", secret)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    config = tmp_path / "config.toml"
    config.write_text(f'[llm]\napi_key = "{secret}"\n')
    code = (
        "import os\n"
        "print(dict(os.environ))\n"
        f"for path in ({str(config)!r}, '/proc/1/environ', '/proc/self/environ'):\n"
        "    try:\n"
        "        print(open(path, 'rb').read())\n"
        "    except Exception as exc:\n"
        "        print(path, type(exc).__name__)\n"
    )
    seen = await sandbox.run(code, ctx())
    assert secret not in seen.text
    assert "Exit status: 0" in seen.text  # the run itself went fine


async def test_an_endless_loop_is_stopped_at_its_time_limit(sandbox: Sandbox) -> None:
    started = time.monotonic()
    seen = await sandbox.run("while True:\n    pass", ctx())
    took = time.monotonic() - started
    assert "Stopped: the run took longer than its limit of 6 s." in seen.text
    assert not seen.ok and took < 6 + 25  # the limit, plus a start and a kill
    after = await sandbox.run("print('still here')", ctx())  # the next run is served
    assert "still here" in after.text


async def test_a_gigabyte_allocation_is_stopped_at_the_memory_limit(sandbox: Sandbox) -> None:
    seen = await sandbox.run("x = bytearray(1024 ** 3)\nprint('ALLOCATED')", ctx())
    assert "ALLOCATED" not in seen.text and not seen.ok
    assert "Stopped: the run needed more than its limit of 256 MB." in seen.text


async def test_a_png_in_out_is_sent_once_as_a_photo(sandbox: Sandbox) -> None:
    seen = await sandbox.run(PNG_CODE, ctx())
    assert "plot.png (photo)" in seen.text, seen.text
    (photo,) = sandbox.sent  # type: ignore[attr-defined]
    assert photo.image is not None and photo.image.startswith(b"\x89PNG")
    await sandbox.run("print('again')", ctx())
    assert len(sandbox.sent) == 1  # type: ignore[attr-defined]  # sent once, not per run


async def test_a_text_file_in_out_is_sent_as_a_document(sandbox: Sandbox) -> None:
    seen = await sandbox.run("open('out/table.csv', 'w').write('a,b\\n1,2\\n')", ctx())
    (doc,) = sandbox.sent  # type: ignore[attr-defined]
    assert doc.document == b"a,b\n1,2\n" and doc.document_name == "table.csv"
    assert "table.csv (document)" in seen.text


async def test_what_a_run_writes_stays_for_its_chat_and_no_other(sandbox: Sandbox) -> None:
    await sandbox.run("open('notes.txt', 'w').write('chat A secret')", ctx(chat="A"))
    again = await sandbox.run("print(open('notes.txt').read())", ctx(chat="A"))
    assert "chat A secret" in again.text
    a_folder = sandbox.folders.path("telegram", "A")
    code = (
        "import os\n"
        "print(sorted(os.listdir('.')))\n"
        "print(sorted(os.listdir('/')))\n"
        f"for path in ('../{a_folder.name}/notes.txt', {str(a_folder / 'notes.txt')!r}):\n"
        "    try:\n"
        "        print(open(path).read())\n"
        "    except Exception as exc:\n"
        "        print(path, type(exc).__name__)\n"
    )
    other = await sandbox.run(code, ctx(chat="B"))
    assert "chat A secret" not in other.text and "notes.txt" not in other.text.split("\n")[2]


async def test_a_link_in_out_is_not_followed(sandbox: Sandbox, tmp_path: Path) -> None:
    host_file = tmp_path / "host-secret.txt"
    host_file.write_text("host secret")
    host_file.chmod(0o644)
    folder = sandbox.folders.prepare("telegram", "1")
    os.symlink(host_file, folder / "out" / "leak.txt")  # as a run could
    seen = await sandbox.run("print('hi')", ctx())
    assert sandbox.sent == []  # type: ignore[attr-defined]
    assert "leak.txt (not a regular file)" in seen.text
