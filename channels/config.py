"""The channels' own config sections, validated by pydantic.

Why here and not in bot/config.py: channels must not import the daemon (`bot`); the
daemon's Settings composes these sections instead. Key names are a contract (see
config.example.toml); unknown keys are errors.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


def reaction_emoji() -> frozenset[str]:
    """Telegram's reaction emoji, read only when a reaction is configured, so a
    deployment without Telegram never imports python-telegram-bot."""
    from telegram.constants import ReactionEmoji

    return frozenset(emoji.value for emoji in ReactionEmoji)


class Section(BaseModel):
    """A config section: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


class TelegramConfig(Section):
    enabled: bool = False
    token: SecretStr | None = None
    api_base_url: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_listen: str = "0.0.0.0"
    webhook_port: int = Field(8443, ge=1, le=65535)
    webhook_secret: SecretStr | None = None
    poll_stall_s: float = Field(90.0, gt=0)
    # Deprecated for [bot] rate_limit_per_min (every channel); set explicitly here, it is
    # still used for [bot] when that is not set, and a line at start says so (bot/config.py).
    rate_limit_per_min: int = Field(20, ge=0)
    answer_edited: bool = False
    # Replies grow in place while the model writes (a draft in DMs, an edited message in
    # groups); "off" sends each reply once it is complete.
    streaming: Literal["auto", "off"] = "auto"
    stream_interval_s: float = Field(1.0, ge=0.3, le=30.0)
    ack_reaction: str = ""  # e.g. "👀" on a group message whose answer is slow to appear

    @field_validator("ack_reaction")
    @classmethod
    def _telegram_reaction(cls, value: str) -> str:
        # Bots may only react with Telegram's standard reaction emoji.
        value = value.strip()
        if value and value not in reaction_emoji():
            raise ValueError(
                f'{value!r} is not one of Telegram\'s reaction emoji (e.g. "👀", "👍")'
            )
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _telegram_secret_charset(cls, value: SecretStr | None) -> SecretStr | None:
        # Telegram accepts 1-256 characters of A-Z a-z 0-9 _ - for secret_token.
        if value is not None and not re.fullmatch(
            r"[A-Za-z0-9_-]{1,256}", value.get_secret_value()
        ):
            raise ValueError("must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
        return value

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> TelegramConfig:
        if self.mode == "webhook" and not (self.webhook_url or "").startswith(
            ("https://", "http://")
        ):
            raise ValueError('webhook_url: webhook mode needs webhook_url = "https://..."')
        return self


class OnebotConfig(Section):
    enabled: bool = False
    mode: Literal["reverse_ws", "forward_ws"] = "reverse_ws"
    host: str = "127.0.0.1"
    port: int = Field(8081, ge=0, le=65535)
    path: str = "/onebot/v11/ws"
    access_token: SecretStr | None = None
    url: str | None = None
    allow_private_media_hosts: list[str] = []
    forward_over_chars: int = Field(1500, ge=0)  # longer replies: one merged-forward message
    send_interval_s: float = Field(1.0, ge=0.0, le=60.0)  # between two sends of one account
    # Longer incoming messages keep their start only (the sender is told); a 15 MB
    # message is never stored whole.
    max_text_chars: int = Field(8000, ge=100, le=1_000_000)

    @model_validator(mode="after")
    def _forward_needs_url(self) -> OnebotConfig:
        if self.mode == "forward_ws" and not (self.url or "").startswith(("ws://", "wss://")):
            raise ValueError('url: forward_ws mode needs url = "ws://host:port" (or wss://)')
        return self


class HttpConfig(Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    token: SecretStr | None = None
    # Slow or idle clients must not hold the server's descriptors (channels/http/server.py):
    # a request's headers must arrive within header_timeout_s of the connection opening
    # (or of the previous answer: it is also the keep-alive idle time), its body within
    # body_timeout_s; connections beyond max_connections are answered 503 and closed.
    header_timeout_s: float = Field(20.0, gt=0, le=3600)
    body_timeout_s: float = Field(20.0, gt=0, le=3600)
    max_connections: int = Field(512, ge=1, le=100_000)
    # Reminders and scheduled tasks in HTTP chats are POSTed here (channels/http/push.py).
    push_url: str | None = None
    # The address browsers use when a reverse proxy serves the API or the console under a
    # name of its own (https://bot.example.org): browsers' requests must name this server
    # as it is bound (127.0.0.1, localhost) or as this says (channels/http/guard.py).
    public_url: str | None = None

    @field_validator("push_url", "public_url")
    @classmethod
    def _push_url_is_http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError('must start with "http://" or "https://"')
        return value or None
