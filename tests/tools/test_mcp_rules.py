"""The pure parts of MCP tools: names the model sees, the per-sender rule, the offer's
budget, result bounding. No server needed."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.config import ConfigError, load_config, mask_secrets
from core.admins import Admins
from core.tools.mcp.config import McpConfig, McpServerConfig
from core.tools.mcp.offer import build_entries, make_offer, name_clashes
from core.tools.mcp.permission import Sender, decide
from core.tools.mcp.render import offered_name, render_result
from core.tools.mcp.session import ServerLink, ToolInfo
from core.tools.mcp.tools import McpTools

ROOT = Path(__file__).resolve().parents[2]
MEMBER, ADMIN = Sender("telegram:2", False), Sender("telegram:1", True)


def test_names_are_prefixed_sanitised_bounded_and_end_in_the_tool_name() -> None:
    assert offered_name("git", "git_log") == "git__git_log"
    assert offered_name("my.server", "do it") == "my_server__do_it"
    long = offered_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long.endswith("t" * 40)
    assert offered_name("s", "x" * 80) == "x" * 64


def test_auto_offers_read_only_to_members_and_the_rest_to_admins() -> None:
    server = McpServerConfig(command="x")
    assert decide(server, "read", True, MEMBER).allowed
    assert not decide(server, "write", False, MEMBER).allowed
    assert decide(server, "write", False, ADMIN).allowed
    narrowed = McpServerConfig(command="x", allow="admins", tool_allow={"read": "everyone"})
    assert not decide(narrowed, "other", True, MEMBER).allowed
    assert decide(narrowed, "read", False, MEMBER).allowed
    listed = McpServerConfig(command="x", allow=["telegram:2"])
    assert decide(listed, "write", False, MEMBER).allowed
    assert not decide(listed, "write", False, Sender("telegram:3", False)).allowed


def test_least_recently_used_are_dropped_to_fit_the_budget() -> None:
    config = {"s": McpServerConfig(command="x")}
    tools = [ToolInfo("s", f"t{i}", "d" * 40, {}, True) for i in range(3)]
    entries = build_entries(tools, config)
    offer = make_offer(
        entries,
        MEMBER,
        native=True,
        last_used={"s__t2": 5.0, "s__t0": 3.0},
        max_tokens=2,
        count=lambda text: 1,
    )
    assert [e.name for e in offer.entries] == ["s__t0", "s__t2"] and offer.dropped == ("s__t1",)


def test_results_are_bounded_and_images_described() -> None:
    text = SimpleNamespace(type="text", text="a" * 100)
    image = SimpleNamespace(type="image", data="QUJD" * 100, mime_type="image/png")
    shown = render_result(SimpleNamespace(content=[text, image], structured_content=None), 50)
    assert shown.startswith("a" * 50) and "more characters were cut" in shown
    assert "QUJD" not in render_result(SimpleNamespace(content=[image]), 500)


def test_config_masks_secrets_and_names_bad_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.toml"
    path.write_text(
        '[mcp]\nservers.d = { url = "https://x/mcp", headers = { Authorization = "Bearer s3" } }\n'
        'servers.t = { command = "t", env = { KEY = "k3y" } }\n'
    )
    dumped = repr(mask_secrets(load_config(path, environ={})))
    assert "s3" not in dumped and "k3y" not in dumped
    path.write_text('[mcp]\nservers.t = { command = "t", url = "https://x" }\n')
    with pytest.raises(ConfigError, match="mcp.servers.t"):
        load_config(path, environ={})


def test_the_sdk_is_not_imported_without_servers() -> None:
    """The idle daemon's memory: the wiring imports no part of the MCP SDK by itself."""
    code = (
        "import sys, bot.cli.main, bot.wiring.app, bot.config, core.turn.processor\n"
        "loaded = [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


async def test_a_server_that_cannot_start_is_down_and_calls_say_so(tmp_path: Path) -> None:
    from core.tools.mcp.session import ServerDown, ServerLink

    link = ServerLink("gone", McpServerConfig(command=str(tmp_path / "no-such-server")), 5.0)
    link.start()
    await link.started()
    assert link.health()["state"] == "down" and link.health()["error"]
    with pytest.raises(ServerDown):
        await link.call("anything", {})  # one more try, then the failure in words
    await link.close()
    assert link.health()["state"] == "stopped"


def test_two_tools_that_would_share_a_name_are_both_withheld_and_the_operator_told_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`get.file` and `get_file` both become `files__get_file`: the model could not say
    which it meant, so neither is offered."""
    clash = [
        ToolInfo("files", "get.file", "d", {}, True),
        ToolInfo("files", "get_file", "d", {}, True),
    ]
    fine = ToolInfo("time", "now", "d", {}, True)
    config = {name: McpServerConfig(command="x") for name in ("files", "time")}
    assert [e.name for e in build_entries([*clash, fine], config)] == ["time__now"]
    assert name_clashes([*clash, fine]) == {"files__get_file": ["files/get.file", "files/get_file"]}

    tools = McpTools(McpConfig(), Admins())
    tools.links = {name: ServerLink(name, McpServerConfig(command="x"), 1.0) for name in config}
    tools.links["files"].tools, tools.links["time"].tools = clash, [fine]
    for link in tools.links.values():
        link.state = "ready"
    with caplog.at_level(logging.WARNING, logger="core.tools.mcp.tools"):
        for _ in range(3):  # once, not every turn
            assert [e.name for e in tools.entries()] == ["time__now"]
    (told,) = [r.getMessage() for r in caplog.records]
    assert "files__get_file would name both files/get.file and files/get_file" in told
