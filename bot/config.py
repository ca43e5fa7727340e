"""Configuration: config.toml + CHATTERD_* environment, validated once at start.

Sources, strongest first: CHATTERD_<SECTION>__<KEY> environment variables, the TOML
file, the conventional OPENAI_API_KEY / OPENAI_BASE_URL / TELEGRAM_BOT_TOKEN variables,
then the defaults below. Unknown keys are errors: a typo must never be silently ignored.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from bot.sections import (
    AccessConfig,
    BotConfig,
    ContextConfig,
    DigestConfig,
    GroupsConfig,
    ImagesConfig,
    JobsConfig,
    LimitsConfig,
    LlmConfig,
    ModerationConfig,
    PrivateConfig,
    RemindersConfig,
    SandboxConfig,
    StorageConfig,
    SubscriptionsConfig,
    ToolsConfig,
    VisionConfig,
    WebConfig,
)
from bot.wiring.media_config import DocumentsConfig, LinksConfig, VoiceConfig
from channels.config import HttpConfig, OnebotConfig, TelegramConfig
from core.knowledge.settings import KnowledgeSettings
from core.tools.mcp.config import McpConfig

log = logging.getLogger(__name__)

DEFAULT_CONFIG_PATH = Path("config.toml")


class ConfigError(Exception):
    """A configuration problem, phrased as one line naming the key."""


class Settings(BaseSettings):
    """The whole configuration; one instance is built at start and passed down."""

    model_config = SettingsConfigDict(
        env_prefix="CHATTERD_",
        env_nested_delimiter="__",
        extra="forbid",
        case_sensitive=False,
    )

    bot: BotConfig = BotConfig()
    llm: LlmConfig = LlmConfig()
    vision: VisionConfig = VisionConfig()
    storage: StorageConfig = StorageConfig()
    context: ContextConfig = ContextConfig()
    tools: ToolsConfig = ToolsConfig()
    telegram: TelegramConfig = TelegramConfig()
    onebot: OnebotConfig = OnebotConfig()
    http: HttpConfig = HttpConfig()
    groups: GroupsConfig = GroupsConfig()
    private: PrivateConfig = PrivateConfig()
    web: WebConfig = WebConfig()
    access: AccessConfig = AccessConfig()
    limits: LimitsConfig = LimitsConfig()
    mcp: McpConfig = McpConfig()  # tools from MCP servers (core/tools/mcp/config.py)
    links: LinksConfig = LinksConfig()
    documents: DocumentsConfig = DocumentsConfig()
    voice: VoiceConfig = VoiceConfig()
    reminders: RemindersConfig = RemindersConfig()
    jobs: JobsConfig = JobsConfig()
    images: ImagesConfig = ImagesConfig()
    sandbox: SandboxConfig = SandboxConfig()
    knowledge: KnowledgeSettings = KnowledgeSettings()  # core/knowledge/settings.py
    moderation: ModerationConfig = ModerationConfig()  # /mod (core/moderation/)
    digest: DigestConfig = DigestConfig()
    subscriptions: SubscriptionsConfig = SubscriptionsConfig()

    @model_validator(mode="after")
    def _telegram_rate_limit_moved(self) -> Settings:
        """`[telegram] rate_limit_per_min` became `[bot] rate_limit_per_min` (every channel):
        set explicitly, the old key still counts unless the new one is set too."""
        key = "rate_limit_per_min"
        if key in self.telegram.model_fields_set and key not in self.bot.model_fields_set:
            self.bot = self.bot.model_copy(update={key: self.telegram.rate_limit_per_min})
        return self


def moved_key_notes(settings: Settings) -> list[str]:
    """One line per old key still in use, for the log at start."""
    if "rate_limit_per_min" not in settings.telegram.model_fields_set:
        return []
    old, new = settings.telegram.rate_limit_per_min, settings.bot.rate_limit_per_min
    if old == new:
        return [
            f"config: [telegram] rate_limit_per_min moved to [bot] rate_limit_per_min "
            f"(it now limits every channel); using {new} (rename the key to silence this)"
        ]
    return [
        f"config: [telegram] rate_limit_per_min moved to [bot] rate_limit_per_min; both are "
        f"set, so [bot] rate_limit_per_min = {new} applies and [telegram] {old} is ignored"
    ]


class _ConventionalEnvSource(PydanticBaseSettingsSource):
    """OPENAI_API_KEY, OPENAI_BASE_URL and TELEGRAM_BOT_TOKEN, as every tool reads them."""

    _MAP = {
        "OPENAI_API_KEY": ("llm", "api_key"),
        "OPENAI_BASE_URL": ("llm", "base_url"),
        "TELEGRAM_BOT_TOKEN": ("telegram", "token"),
    }

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]):
        super().__init__(settings_cls)
        self._environ = environ

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for var, (section, key) in self._MAP.items():
            if self._environ.get(var):
                found.setdefault(section, {})[key] = self._environ[var]
        return found


def _settings_class(toml_path: Path | None, environ: Mapping[str, str]) -> type[Settings]:
    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
            if toml_path is not None:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
            sources.append(_ConventionalEnvSource(settings_cls, environ))
            return tuple(sources)

    return _Loaded


def config_path(cli_value: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """--config wins, then CHATTERD_CONFIG, then ./config.toml."""
    environ = os.environ if environ is None else environ
    return Path(cli_value or environ.get("CHATTERD_CONFIG") or DEFAULT_CONFIG_PATH)


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load and validate; raise ConfigError with one line naming the bad key."""
    environ = os.environ if environ is None else environ
    toml_path = path if path is not None and path.is_file() else None
    if path is not None and path.exists() and not path.is_file():
        raise ConfigError(f"config: {path} is not a file")
    try:
        settings = _settings_class(toml_path, environ)()
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None
    except ValueError as exc:  # TOML syntax errors surface as ValueError subclasses
        raise ConfigError(f"config: {toml_path}: {exc}") from None
    for note in moved_key_notes(settings):
        log.warning("%s", note)
    return settings


def _one_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    key = ".".join(str(part) for part in error["loc"]) or "config"
    message = error["msg"]
    if error["type"] == "extra_forbidden":
        message = "unknown key (check the spelling against config.example.toml)"
    return f"config: {key}: {message}"


def mask_secrets(settings: Settings) -> dict[str, Any]:
    """The effective config as plain data, every secret replaced by '***'."""
    masked: dict[str, Any] = _mask(settings, settings.model_dump(mode="json"))
    return masked


def _mask(value: object, data: Any) -> Any:
    """`data` (value's JSON dump) with each SecretStr, at any depth, shown as '***'."""
    if isinstance(value, SecretStr):
        return "***"
    if isinstance(value, BaseModel):
        return {key: _mask(getattr(value, key), data[key]) for key in data}
    if isinstance(value, list):
        return [_mask(item, dumped) for item, dumped in zip(value, data, strict=True)]
    if isinstance(value, dict):  # e.g. [mcp] servers, and their headers and env
        return {key: _mask(item, data[key]) for key, item in value.items()}
    return data
