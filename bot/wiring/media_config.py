"""Config sections for what people share: `[links]`, `[documents]`, `[voice]`.

The sections follow the config's rules: unknown keys are errors, a bad value names its
key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from channels.config import Section
from core.media.fetch import split_host_port

MB = 1024 * 1024


class LinksConfig(Section):
    """Links in messages addressed to the bot, and the `[Read: url]` tool."""

    enabled: bool = True
    max_links: int = Field(3, ge=0, le=10)  # per message (and the message it replies to)
    max_chars: int = Field(4000, ge=200, le=100_000)  # of one page's text
    max_bytes: int = Field(5 * MB, ge=1024, le=100 * MB)  # of one page's body
    timeout_s: float = Field(15.0, gt=0, le=120)
    max_redirects: int = Field(3, ge=0, le=10)
    read_tool: bool = True  # offer the model `[Read: url]` (native mode: a `read` function)
    # Private/loopback hosts that may be fetched anyway: "host" (every port) or "host:port".
    allow_hosts: list[str] = []

    @field_validator("allow_hosts")
    @classmethod
    def _host_entries(cls, value: list[str]) -> list[str]:
        for entry in value:
            host, _ = split_host_port(entry)
            if not host or "/" in host.split("/")[0] or " " in entry.strip():
                raise ValueError(f"{entry!r} is not a host or host:port")
        return value


class DocumentsConfig(Section):
    """PDF, DOCX and text files sent in chats."""

    enabled: bool = True
    max_bytes: int = Field(10 * MB, ge=1024, le=100 * MB)
    max_pages: int = Field(50, ge=1, le=5000)
    max_chars: int = Field(12_000, ge=200, le=500_000)  # of one document's text, this turn


class VoiceConfig(Section):
    """Voice notes in (speech to text) and, optionally, spoken replies out."""

    enabled: bool = False
    base_url: str | None = None  # default: [llm] base_url
    api_key: SecretStr | None = None  # default: [llm] api_key
    model: str = "whisper-1"
    max_seconds: int = Field(300, ge=1, le=7200)
    max_bytes: int = Field(20 * MB, ge=1024, le=100 * MB)
    timeout_s: float = Field(60.0, gt=0, le=600)
    reply: Literal["off", "when_spoken", "always"] = "off"
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"
    tts_max_chars: int = Field(1500, ge=10, le=4096)  # longer replies are sent as text only

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value
