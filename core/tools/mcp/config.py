"""`[mcp]`: which MCP servers to start or reach, and who may use their tools.

Lives in core (not bot/config.py) so the session manager and the permission rule read
the same typed model the daemon validates at start; bot/config.py only mounts it.
Header and env values are secrets: SecretStr, so the masked config dump shows '***'.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# "auto": read-only tools (readOnlyHint) for everyone the bot serves, the rest for admins.
Allow = Literal["auto", "everyone", "admins"] | list[str]

_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_USER_KEY = re.compile(r"[a-z]+:.+")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def check_allow(value: Allow) -> Allow:
    if isinstance(value, list):
        for entry in value:
            if not _USER_KEY.fullmatch(entry):
                raise ValueError(f"{entry!r} is not a platform:id entry (e.g. telegram:123)")
    return value


class McpServerConfig(_Section):
    """One server: `command` (stdio child process) or `url` (streamable HTTP or SSE)."""

    command: str | None = None
    args: list[str] = []
    env: dict[str, SecretStr] = {}  # added to the daemon's own environment
    cwd: str | None = None
    url: str | None = None
    transport: Literal["http", "sse"] = "http"  # for `url`: SSE only where that is all it speaks
    headers: dict[str, SecretStr] = {}  # sent with every request to this server
    timeout_s: float | None = Field(None, gt=0, le=3600)  # per call; None: [mcp] timeout_s
    tools: list[str] | None = None  # which of its tools to offer; None: all
    allow: Allow = "auto"
    tool_allow: dict[str, Allow] = {}  # per-tool overrides of `allow`
    enabled: bool = True

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: Allow) -> Allow:
        return check_allow(value)

    @field_validator("tool_allow")
    @classmethod
    def _tool_allow(cls, value: dict[str, Allow]) -> dict[str, Allow]:
        for entry in value.values():
            check_allow(entry)
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (stdio) or `url` (HTTP)")
        return self


class McpConfig(_Section):
    timeout_s: float = Field(30.0, gt=0, le=3600)  # per tool call, unless a server says otherwise
    max_result_chars: int = Field(16_000, ge=200, le=1_000_000)
    connect_timeout_s: float = Field(30.0, gt=0, le=600)  # start + initialize + list tools
    max_tool_tokens: int = Field(4000, ge=0)  # tool definitions offered per turn; 0: no cap
    servers: dict[str, McpServerConfig] = {}

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in value:
            if not _SERVER_NAME.fullmatch(name):
                raise ValueError(f"server name {name!r}: letters, digits, - and _ (max 32)")
        return value
