"""The daemon's own config sections: what each `[section]` of config.toml holds, with its
defaults and the checks of its values.

Why apart from bot/config.py: that module loads and validates the whole (sources,
environment names, one-line errors, masking secrets); this one only says what each
section is. The channels' sections live in channels/config.py, the media readers' in
bot/wiring/media_config.py, MCP's in core/tools/mcp/config.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, Field, SecretStr, field_validator

from channels.config import Section
from core.tools.mcp.config import Allow, check_allow


def _person_allow(value: Allow) -> Allow:
    """Who may use a tool that acts for one person; MCP's per-server "auto" means nothing here."""
    if value == "auto":
        raise ValueError('it is "everyone", "admins" or a list of platform:id')
    return check_allow(value)


# `[images] allow`, `[jobs] spawn_allow`, `[sandbox] allow`: checked when offered and when run.
PersonAllow = Annotated[Allow, AfterValidator(_person_allow)]

PLATFORMS = ("telegram", "qq", "http", "console")


class BotConfig(Section):
    name: str = Field("chatterd", min_length=1, max_length=64)
    workspace: Path = Path("workspace")
    admins: list[str] = []
    timezone: str = "UTC"
    # Turns answered at once across chats (one chat is always one at a time); a turn
    # waiting for the model holds no database connection.
    max_in_flight: int = Field(64, ge=1, le=4096)
    # Accepted turns waiting for a place beyond max_in_flight; past it new work is turned
    # away (HTTP: 503 + Retry-After, nothing stored; Telegram/QQ: kept pending for recovery).
    max_waiting: int = Field(1024, ge=0, le=100_000)
    # Of those, one sender's turns across all their chats (a model hung on one person's
    # requests must not make every other chat wait); at most max_in_flight.
    max_in_flight_per_user: int = Field(8, ge=1, le=4096)
    # Nothing lost: accepted messages a dead process left open are finished by recovery.
    recovery_interval_s: float = Field(10.0, gt=0, le=3600)
    recover_within_s: float = Field(900.0, ge=0)  # older ones expire; 0 turns recovery off
    shutdown_grace_s: float = Field(30.0, gt=0, le=3600)  # SIGTERM: finish turns this long
    # Answered messages per user per minute on every channel (commands count, untriggered
    # group chatter does not); 0 = off. Admins and the console are exempt.
    rate_limit_per_min: int = Field(20, ge=0)

    @field_validator("admins")
    @classmethod
    def _admins_are_platform_ids(cls, value: list[str]) -> list[str]:
        for entry in value:
            platform, sep, user_id = entry.partition(":")
            if not sep or platform not in PLATFORMS or not user_id.strip():
                raise ValueError(
                    f"{entry!r} is not 'platform:id' with platform one of {', '.join(PLATFORMS)}"
                )
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone {value!r} (use an IANA name like Europe/Berlin)"
            ) from None
        return value


class EndpointConfig(Section):
    """One `fallbacks` entry: a second OpenAI-compatible endpoint with its own key."""

    base_url: str
    api_key: SecretStr | None = None  # none: no key is sent (never the primary's)
    model: str = Field(min_length=1)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value


class LlmConfig(Section):
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    timeout_s: float = Field(60.0, gt=0, le=3600)
    max_retries: int = Field(2, ge=0, le=10)
    temperature: float = Field(0.7, ge=0, le=2)
    context_window: int = Field(8192, ge=512)
    reply_tokens: int = Field(1024, ge=16)
    local_model: Path | None = None
    stream_stall_s: float = Field(30.0, gt=0, le=3600)  # a silent stream counts as a timeout
    fallbacks: list[EndpointConfig] = []  # tried in order when the one before is down
    cooldown_s: float = Field(60.0, ge=0, le=86400)  # a failed endpoint is skipped this long


class VisionConfig(Section):
    enabled: bool = False
    mode: Literal["describe", "passthrough"] = "describe"
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    max_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    max_side: int = Field(2048, ge=64, le=8192)  # longer images are downscaled first
    # Larger images are refused from their header, never decoded (decompression bombs).
    max_megapixels: float = Field(24.0, gt=0, le=500)
    concurrency: int = Field(4, ge=1, le=64)  # images read at once, in all chats
    concurrency_per_chat: int = Field(2, ge=1, le=64)  # of those, per chat and per sender
    fallbacks: list[EndpointConfig] = []  # describe mode; cool-down from [llm] cooldown_s


class StorageConfig(Section):
    # sqlite+aiosqlite:// (the older spelling) still works and means the same as sqlite://.
    url: str = "sqlite:///data/chatterd.sqlite"
    # PostgreSQL: every connection a daemon opens, however many turns are in flight
    # (a turn holds one only for each short transaction); `replicas` daemons share the
    # server, and `chatterd run` stops when replicas x pool_size cannot fit its
    # max_connections.
    pool_size: int = Field(15, ge=1, le=1000)
    replicas: int = Field(1, ge=1, le=1000)

    @field_validator("url")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        if not value.startswith(("sqlite://", "sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "must start with sqlite://, sqlite+aiosqlite:// or postgresql+asyncpg://"
            )
        return value


class ContextConfig(Section):
    tokenizer: str = "o200k_base"
    history_limit: int = Field(200, ge=1, le=100_000)
    compaction: bool = True  # fold history that fell out of the window into a summary
    compaction_min_turns: int = Field(10, ge=2, le=10_000)
    # Appended to every user message (stored and sent), e.g. a note on tool access.
    message_suffix: str = ""
    # Where this turn's own material (time, session, sender memory) goes, after the history:
    # "system" a late system message, "user" a <turn_context> block opening the user
    # message (endpoints that drop or hoist later system messages), "auto" = "user" for
    # the embedded model, else "system" (docs/configuration.md).
    turn_material: Literal["auto", "system", "user"] = "auto"


class ToolsConfig(Section):
    search: bool = True
    max_rounds: int = Field(3, ge=1, le=10)
    search_results: int = Field(5, ge=1, le=20)
    search_timeout_s: float = Field(10.0, gt=0, le=120)
    mode: Literal["markers", "native"] = "markers"


class WebConfig(Section):
    """The operator's console under /console on the HTTP server (bot/console/)."""

    enabled: bool = True  # served only when a password is set too
    password: SecretStr | None = None
    session_hours: float = Field(12.0, gt=0, le=24 * 30)  # a sign-in lasts this long
    secure_cookie: bool = False  # set when a TLS proxy serves the console as https://

    @field_validator("password")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 8:
            raise ValueError("must be at least 8 characters")
        return value


class GroupsConfig(Section):
    wake_words: list[str] = []
    store_untriggered: bool = True
    # One sender's triggering messages this close together are one turn (0: off);
    # a burst never waits longer than burst_max_ms from its first message.
    burst_ms: int = Field(1500, ge=0, le=60_000)
    burst_max_ms: int = Field(6000, ge=0, le=120_000)
    # Speaking up unasked (core/turn/chime.py): off, or at most one decision call per
    # chime_min_gap_s (0: 120 s for low, 45 s for normal); `/bot chime` per group.
    chime_in: Literal["off", "low", "normal"] = "off"
    chime_min_gap_s: float = Field(0.0, ge=0, le=86_400)


class PrivateConfig(Section):
    """Private chats (who may use them is `[access] private`)."""

    burst_ms: int = Field(1000, ge=0, le=60_000)
    burst_max_ms: int = Field(6000, ge=0, le=120_000)


def _platform_ids(value: list[str], *, groups: bool) -> list[str]:
    """Each entry `platform:id`; group entries are chat keys (`telegram:-100123`,
    `qq:group:123`, `http:<chat_id>`), user entries are user keys (`qq:123`)."""
    for entry in value:
        platform, sep, ident = entry.partition(":")
        if not sep or platform not in PLATFORMS or not ident.strip() or ident != ident.strip():
            raise ValueError(
                f"{entry!r} is not 'platform:id' with platform one of {', '.join(PLATFORMS)}"
            )
        problem = _group_problem(platform, ident) if groups else _user_problem(platform, ident)
        if problem:
            raise ValueError(f"{entry!r}: {problem}")
    return value


def _group_problem(platform: str, ident: str) -> str:
    """What is wrong with a group's chat key, as the channels spell chat ids ("" if fine)."""
    if platform == "qq" and not (ident.startswith("group:") and ident[6:].isdigit()):
        return "a QQ group is written qq:group:<number>"
    if platform == "telegram" and not (ident.startswith("-") and ident[1:].isdigit()):
        return "a Telegram group id is negative, e.g. telegram:-1001234"
    if platform == "console":
        return "the console has no groups"
    return ""


def _user_problem(platform: str, ident: str) -> str:
    if platform == "qq" and ident.startswith(("group:", "private:")):
        return "a QQ user is written qq:<number>, not as a chat id"
    return ""


class AccessConfig(Section):
    """Where the bot serves (core/turn/access.py decides per message; `/bot allow|deny` and
    `/bot on|off` change it per group at run time, stored in the database)."""

    groups: Literal["all", "allowlist"] = "all"
    allowed_groups: list[str] = []  # telegram:-1001234, qq:group:123, http:team (http:group:team)
    blocked_users: list[str] = []  # user keys, as in [bot] admins
    private: Literal["all", "allowlist", "off"] = "all"
    allowed_users: list[str] = []

    @field_validator("allowed_groups")
    @classmethod
    def _group_keys(cls, value: list[str]) -> list[str]:
        return _platform_ids(value, groups=True)

    @field_validator("blocked_users", "allowed_users")
    @classmethod
    def _user_keys(cls, value: list[str]) -> list[str]:
        return _platform_ids(value, groups=False)


class LimitsConfig(Section):
    """Daily token quotas (prompt + completion, per UTC day); 0 = unlimited."""

    user_tokens_per_day: int = Field(0, ge=0)
    group_tokens_per_day: int = Field(0, ge=0)
    global_tokens_per_day: int = Field(0, ge=0)


class RemindersConfig(Section):
    """`/remind` and `/schedule`: limits, and how late a missed occurrence is still sent."""

    enabled: bool = True
    max_per_user: int = Field(20, ge=0)
    max_per_chat: int = Field(100, ge=0)
    min_interval_s: int = Field(60, ge=1)  # the shortest gap between two repeats
    catch_up_s: float = Field(21600.0, ge=0)  # older occurrences are recorded as missed
    tick_s: float = Field(1.0, gt=0, le=60)  # how often due reminders are looked for


class JobsConfig(Section):
    """Work that outlives a turn (core/jobs/runner.py): how much runs at once, how much one
    person may have waiting, and how long a claim lasts without its process renewing it."""

    max_running: int = Field(2, ge=1, le=64)  # jobs running at once in this process
    max_per_user: int = Field(3, ge=0)  # queued or running per person; 0: no limit
    lease_s: float = Field(60.0, ge=5, le=3600)  # a dead process's job is taken over after this
    # Background tasks (the model's `spawn` tool, core/background/): who may start one, and how
    # far one task may go (tool rounds; tokens, counted to its requester's usage).
    spawn_allow: PersonAllow = "everyone"
    max_steps: int = Field(12, ge=1, le=100)
    max_tokens: int = Field(60000, ge=1000)


class ImagesConfig(Section):
    """Pictures drawn on request (`/draw`, the model's `draw` tool) by an OpenAI-compatible
    `/v1/images/generations`; each one is a job (core/jobs/), counted in usage and quotas."""

    enabled: bool = False
    base_url: str | None = None  # none: [llm] base_url
    api_key: SecretStr | None = None  # none: [llm] api_key
    model: str = "gpt-image-1"
    size: str = "1024x1024"
    quality: str | None = None  # none: the provider's default
    timeout_s: float = Field(180.0, gt=0, le=3600)
    max_per_user_per_day: int = Field(10, ge=0)  # 0: no limit
    max_per_chat_per_day: int = Field(50, ge=0)  # 0: no limit
    # Who may draw: "everyone", "admins" ([bot] admins) or a list of "platform:id" (plus
    # admins); the same rule as MCP tools, checked when offered and again when run.
    allow: PersonAllow = "admins"


class ModerationConfig(Section):
    """Keeping groups in order (`/mod`, core/moderation/): who counts as an admin in a group,
    and how long a member counts as new for the links rule."""

    enabled: bool = True
    # A group's own owner and admins (as the platform reports them) are admins there too.
    group_admins: bool = True
    new_member_hours: float = Field(24.0, gt=0, le=24 * 365)
    report_tokens: int = Field(200, ge=20, le=4000)  # the judging call's answer


class SandboxConfig(Section):
    """The model's `run_python` tool (core/sandbox/): Python run in a child process with no
    network and nothing of the host but the chat's own folder; files it writes under out/
    are sent to the chat."""

    enabled: bool = True
    # "bwrap" (bubblewrap namespaces), "wasi" (CPython in WebAssembly under wasmtime), or
    # "auto": bwrap where user namespaces work, else wasi; the start log says which and why.
    engine: Literal["auto", "bwrap", "wasi"] = "auto"
    # Who may run code: "admins" ([bot] admins), "everyone" or a list of "platform:id" (plus
    # admins); checked when the tool is offered and again when a call runs.
    allow: PersonAllow = "admins"
    timeout_s: float = Field(30.0, gt=0, le=600)
    memory_mb: int = Field(256, ge=64, le=16384)
    max_output_chars: int = Field(4000, ge=100, le=100_000)
    max_files: int = Field(5, ge=0, le=50)  # files of out/ sent after one run
    max_file_mb: int = Field(10, ge=1, le=50)  # also the largest file a run may write
    max_processes: int = Field(32, ge=1, le=1024)  # bwrap: processes one run may hold
    keep_hours: float = Field(24.0, gt=0)  # a chat's folder is removed this long after its last run
    max_running: int = Field(2, ge=1, le=32)  # runs at once; more wait their turn
    folder: Path = Path("data/sandbox")  # the chats' folders
    wasi_cache: Path = Path("data/wasi-cache")  # the wasi engine's compiled module
    python: str = ""  # bwrap: the interpreter a run uses; empty: /usr/bin/python3


class DigestConfig(Section):
    """`/digest`: a recap of what the group said (docs/commands.md)."""

    enabled: bool = True
    lookback_h: float = Field(24.0, gt=0, le=24 * 31)  # a chat's first digest goes this far back
    max_messages: int = Field(3000, ge=10, le=100_000)  # stored messages read back at most


class SubscriptionsConfig(Section):
    """`/sub`: feeds a chat follows (docs/commands.md); fetched under `[links]` rules."""

    enabled: bool = True
    poll_s: float = Field(900.0, ge=10)  # how often each feed is polled
    max_per_chat: int = Field(20, ge=1, le=1000)
    max_bytes: int = Field(2 * 1024 * 1024, ge=1024, le=50 * 1024 * 1024)  # of one feed body
    tell_after: int = Field(3, ge=1)  # failed polls in a row before the chat is told, once
    backoff_max_s: float = Field(21600.0, ge=10)  # a failing feed is polled at least this often
