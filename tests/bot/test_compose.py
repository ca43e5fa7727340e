"""compose.yaml and .env.example read as a deployer relies on them (no engine needed).

Why: the traps other bots' trackers show are all in this file: NapCat's reverse
WebSocket pointed at `localhost`, OneBot and WebUI ports published to the world, secrets
written into the compose file, data outside volumes, a bot racing its database at start.
The image itself is exercised by tests/bot/test_container.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
ENV_EXAMPLE = (ROOT / ".env.example").read_text(encoding="utf-8")
VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}")
SECRET_WORDS = ("PASSWORD", "TOKEN", "SECRET", "API_KEY")


def _env(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def _ports(service: str) -> list[str]:
    return [str(p) for p in SERVICES[service].get("ports", [])]


def test_published_ports_are_only_http_and_webui_and_on_loopback() -> None:
    published = {name: _ports(name) for name in SERVICES if _ports(name)}
    assert set(published) == {"chatterd", "napcat"}, published
    for name, ports in published.items():
        for port in ports:
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
    container_ports = {p.rsplit(":", 1)[1] for ports in published.values() for p in ports}
    assert container_ports == {"8080", "6099"}  # HTTP API and NapCat's WebUI, not OneBot


def test_napcat_reaches_chatterd_by_service_name_on_a_shared_private_network() -> None:
    chatterd, setup = _env("chatterd"), _env("napcat-setup")
    url = setup["ONEBOT_URL"]
    port, path = chatterd["CHATTERD_ONEBOT__PORT"], "/onebot/v11/ws"  # the default path
    assert url == f"ws://chatterd:{port}{path}"
    assert chatterd["CHATTERD_ONEBOT__MODE"] == "reverse_ws"
    assert chatterd["CHATTERD_ONEBOT__HOST"] == "0.0.0.0"  # else NapCat cannot connect
    assert set(SERVICES["napcat"]["networks"]) & set(SERVICES["chatterd"]["networks"])
    # The token NapCat sends is the one chatterd checks.
    assert "CHATTERD_ONEBOT__ACCESS_TOKEN" in setup["ONEBOT_TOKEN"]
    assert "CHATTERD_ONEBOT__ACCESS_TOKEN=" in ENV_EXAMPLE


def test_postgres_is_healthy_before_chatterd_and_only_on_an_internal_network() -> None:
    postgres = SERVICES["postgres"]
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert SERVICES["chatterd"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert _env("chatterd")["CHATTERD_STORAGE__URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in _env("chatterd")["CHATTERD_STORAGE__URL"]
    (network,) = postgres["networks"]
    assert COMPOSE["networks"][network].get("internal") is True


def test_everything_that_must_survive_an_upgrade_is_on_a_named_volume() -> None:
    wanted = {
        "chatterd": {"/data", "/workspace"},
        "postgres": {"/var/lib/postgresql/data"},
        "napcat": {"/app/napcat/config", "/app/.config/QQ"},
    }
    for service, targets in wanted.items():
        mounts = dict(v.split(":")[1::-1] for v in SERVICES[service]["volumes"])
        for target in targets:
            assert target in mounts, f"{service}: {target} is not on a volume"
            assert mounts[target] in COMPOSE["volumes"], f"{service}: {target} not named"


def test_no_secret_is_written_in_compose_and_every_one_is_in_env_example() -> None:
    for name, service in SERVICES.items():
        for key, value in service.get("environment", {}).items():
            if any(word in key for word in SECRET_WORDS):
                assert VARIABLE.fullmatch(str(value)), f"{name}: {key} is not from .env"
    text = (ROOT / "compose.yaml").read_text(encoding="utf-8")
    example_keys = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE, re.MULTILINE))
    used = {m.group(1) for m in VARIABLE.finditer(text)}
    assert not used - example_keys, f"not explained in .env.example: {used - example_keys}"
    required = {m.group(1) for m in VARIABLE.finditer(text) if m.group(2) == ":?"}
    assert required == {"POSTGRES_PASSWORD", "CHATTERD_ONEBOT__ACCESS_TOKEN"}
    filled = re.findall(r"^([A-Z0-9_]+)=(\S+)", ENV_EXAMPLE, re.MULTILINE)
    assert not filled, f".env.example ships values: {filled}"


def test_the_setup_runs_the_same_image_built_the_same_way() -> None:
    # Two builds of one tag with different arguments: whichever ran last would win.
    chatterd, setup = SERVICES["chatterd"], SERVICES["napcat-setup"]
    assert setup["image"] == chatterd["image"] and setup["build"] == chatterd["build"]
    assert chatterd["build"]["dockerfile"] == "Containerfile"


def test_no_service_runs_as_root_by_default_but_the_one_shot_setup() -> None:
    napcat = _env("napcat")
    assert napcat["NAPCAT_UID"] != "0" and "1000" in napcat["NAPCAT_UID"]
    assert "user" not in SERVICES["chatterd"]  # the image's own user 10001
    assert "ports" not in SERVICES["napcat-setup"]


def _run_setup(folder: Path, token: str) -> None:
    setup = SERVICES["napcat-setup"]
    assert setup["entrypoint"] == ["python3", "-c"]
    env = {"ONEBOT_URL": _env("napcat-setup")["ONEBOT_URL"], "ONEBOT_TOKEN": token,
           "NAPCAT_CONFIG": str(folder)}  # fmt: skip
    subprocess.run([sys.executable, "-c", setup["command"][0]], env=env, check=True,
                   capture_output=True, timeout=30)  # fmt: skip


def test_setup_points_new_and_existing_accounts_at_chatterd_keeping_other_clients(
    tmp_path: Path,
) -> None:
    account = tmp_path / "onebot11_12345.json"
    other = {"name": "mine", "url": "ws://elsewhere:9000", "enable": True}
    stale = {"name": "chatterd", "url": "ws://localhost:8081/onebot/v11/ws", "token": "old"}
    account.write_text(json.dumps({"network": {"websocketClients": [other, stale]}}))

    _run_setup(tmp_path, "s3cret-token")
    _run_setup(tmp_path, "s3cret-token")  # every `up` runs it again: nothing piles up

    for path in (tmp_path / "onebot11.json", account):
        clients = json.loads(path.read_text())["network"]["websocketClients"]
        ours = [c for c in clients if c["name"] == "chatterd"]
        assert len(ours) == 1
        assert ours[0]["url"] == "ws://chatterd:8081/onebot/v11/ws"
        assert ours[0]["token"] == "s3cret-token" and ours[0]["enable"] is True
        assert ours[0]["messagePostFormat"] == "array"
    assert other in json.loads(account.read_text())["network"]["websocketClients"]
