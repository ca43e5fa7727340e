"""Per-chat settings admins change at run time: on/off, allow/deny, persona, wake words.

Why in the database: they must survive a restart and be the same on every replica. The
chat commands (`/bot ...`) and the web console both change them through this one class,
so neither has rules of its own. A chat without a row has the defaults
(`ChatSettings(platform, chat_id)`): enabled, the config decides access, no persona,
no extra wake words.

Each method is one transaction or one read. A change runs in one transaction that
makes sure the row exists, locks it (PostgreSQL; SQLite's single writer serialises
anyway), reads it, and writes the new values, so two admins adding wake words at the
same moment on two replicas both get theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite

from memory.chats.models import ChatSettingsRow
from memory.chats.types import InChat
from memory.db.migrate import Database
from memory.db.rows import AUTHOR_LEN, check_key, clean_text, utcnow

PERSONA_MAX_CHARS = 500
WAKE_WORDS_MAX = 10
WAKE_WORD_MAX_CHARS = 32
SETTINGS = frozenset({"enabled", "allowed", "persona", "wake_words", "timezone", "chime"})
CHIME_LEVELS = ("off", "low", "normal")  # how often the bot speaks up unasked in a group


class ChatSettingsError(ValueError):
    """A change that was refused; str() says why and is safe to show the admin."""


@dataclass(frozen=True)
class ChatSettings(InChat):
    """One chat's settings; a chat with no row gets these defaults.

    `allowed`: True after `/bot allow`, False after `/bot deny`, None when `[access]`
    decides. `enabled` False is `/bot off`. `id` is the row's id (None: no row yet), the
    cursor for `ChatSettingsStore.listing`.
    """

    platform: str
    chat_id: str
    enabled: bool = True
    allowed: bool | None = None
    persona: str = ""
    wake_words: tuple[str, ...] = ()
    timezone: str | None = None  # /bot timezone: reminders here; None: [bot] timezone
    chime: str | None = None  # /bot chime: off|low|normal here; None: [groups] chime_in
    updated_by: str = ""
    updated_at: datetime | None = None
    id: int | None = None


def check_persona(text: object) -> str:
    """The persona as stored: stripped, at most PERSONA_MAX_CHARS characters."""
    if not isinstance(text, str):
        raise ChatSettingsError("the persona must be text")
    cleaned = clean_text(text.strip())
    if len(cleaned) > PERSONA_MAX_CHARS:
        raise ChatSettingsError(
            f"the persona is {len(cleaned)} characters; at most {PERSONA_MAX_CHARS} fit"
        )
    return cleaned


def check_wake_word(word: object) -> str:
    """One wake word as stored: inner spaces collapsed, 1..WAKE_WORD_MAX_CHARS characters."""
    if not isinstance(word, str):
        raise ChatSettingsError("a wake word must be text")
    cleaned = clean_text(" ".join(word.split()))
    if not cleaned:
        raise ChatSettingsError("a wake word cannot be empty")
    if cleaned.startswith("/"):
        raise ChatSettingsError("a wake word cannot start with / (that is a command)")
    if len(cleaned) > WAKE_WORD_MAX_CHARS:
        raise ChatSettingsError(
            f"the wake word {cleaned[:WAKE_WORD_MAX_CHARS]}… is too long: "
            f"at most {WAKE_WORD_MAX_CHARS} characters"
        )
    return cleaned


def check_wake_words(words: Iterable[object]) -> tuple[str, ...]:
    """Each word checked; duplicates (ignoring case) dropped; at most WAKE_WORDS_MAX."""
    if isinstance(words, str):
        raise ChatSettingsError("wake words must be a list of words, not one string")
    kept: dict[str, str] = {}
    for word in words:
        cleaned = check_wake_word(word)
        kept.setdefault(cleaned.casefold(), cleaned)
    if len(kept) > WAKE_WORDS_MAX:
        raise ChatSettingsError(f"at most {WAKE_WORDS_MAX} wake words per chat")
    return tuple(kept.values())


def check_timezone(name: object) -> str | None:
    """An IANA zone name as stored (None: back to `[bot] timezone`)."""
    if name is None or name == "":
        return None
    if not isinstance(name, str) or len(name) > 64:
        raise ChatSettingsError("the time zone must be an IANA name like Asia/Shanghai")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ChatSettingsError(
            f"{name[:64]} is not a time zone I know (use an IANA name like Asia/Shanghai)"
        ) from None
    return name


def check_chime(level: object) -> str | None:
    """A chime-in level as stored (None: back to `[groups] chime_in`)."""
    if level is None or level == "":
        return None
    if not isinstance(level, str) or level.casefold() not in CHIME_LEVELS:
        raise ChatSettingsError(f"the chime-in level must be one of {', '.join(CHIME_LEVELS)}")
    return level.casefold()


def _check_author(by: object) -> str:
    if not isinstance(by, str) or not by.strip() or len(by.strip()) > AUTHOR_LEN:
        raise ChatSettingsError(f"chat settings: `by` must be 1..{AUTHOR_LEN} characters")
    return clean_text(by.strip())


def _checked(changes: Mapping[str, Any]) -> dict[str, Any]:
    """The changes as columns, each value checked; unknown names are refused."""
    unknown = sorted(set(changes) - SETTINGS)
    if unknown:
        raise ChatSettingsError(f"unknown chat setting(s): {', '.join(unknown)}")
    values: dict[str, Any] = {}
    if "enabled" in changes:
        if not isinstance(changes["enabled"], bool):
            raise ChatSettingsError("enabled must be true or false")
        values["enabled"] = changes["enabled"]
    if "allowed" in changes:
        if changes["allowed"] is not None and not isinstance(changes["allowed"], bool):
            raise ChatSettingsError("allowed must be true, false or none")
        values["allowed"] = changes["allowed"]
    if "persona" in changes:
        values["persona"] = check_persona(changes["persona"])
    if "wake_words" in changes:
        values["wake_words"] = list(check_wake_words(changes["wake_words"]))
    if "timezone" in changes:
        values["timezone"] = check_timezone(changes["timezone"])
    if "chime" in changes:
        values["chime"] = check_chime(changes["chime"])
    return values


_COLUMNS = (
    ChatSettingsRow.platform,
    ChatSettingsRow.chat_id,
    ChatSettingsRow.enabled,
    ChatSettingsRow.allowed,
    ChatSettingsRow.persona,
    ChatSettingsRow.wake_words,
    ChatSettingsRow.timezone,
    ChatSettingsRow.chime,
    ChatSettingsRow.updated_by,
    ChatSettingsRow.updated_at,
    ChatSettingsRow.id,
)
# Built once: the gate reads a chat's settings on most turns.
_ONE_CHAT = select(*_COLUMNS).where(
    ChatSettingsRow.platform == bindparam("platform"),
    ChatSettingsRow.chat_id == bindparam("chat_id"),
)


def _settings(row: Any) -> ChatSettings:
    return ChatSettings(
        platform=row.platform,
        chat_id=row.chat_id,
        enabled=bool(row.enabled),
        allowed=row.allowed,
        persona=row.persona or "",
        wake_words=tuple(row.wake_words or ()),
        timezone=row.timezone,
        chime=row.chime,
        updated_by=row.updated_by or "",
        updated_at=row.updated_at,
        id=row.id,
    )


# A change computed from the current settings: the new values of some settings.
Change = Callable[[ChatSettings], Mapping[str, Any]]


class ChatSettingsStore:
    """The chat_settings table over a `Database`; each method is one transaction or read."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._insert = sqlite.insert if database.dialect == "sqlite" else postgresql.insert

    async def get(self, platform: str, chat_id: str) -> ChatSettings:
        """This chat's settings, or the defaults when nobody changed any."""
        check_key("chat settings", platform, chat_id)
        params = {"platform": platform, "chat_id": chat_id}
        row = await self._db.read(lambda conn: conn.execute(_ONE_CHAT, params).first())
        return _settings(row) if row is not None else ChatSettings(platform, chat_id)

    async def update(self, platform: str, chat_id: str, *, by: str, **changes: Any) -> ChatSettings:
        """Set some of enabled, allowed, persona, wake_words; the others stay.

        Raises ChatSettingsError (nothing written) for a value that does not fit.
        """
        values = _checked(changes)
        return await self.modify(platform, chat_id, by=by, change=lambda _current: values)

    async def reset(self, platform: str, chat_id: str, *, by: str) -> ChatSettings:
        """Persona and wake words back to the defaults.

        `enabled` and `allowed` stay: they decide whether the bot serves the chat at all,
        and a reset of how it talks must never open or silence a group by accident.
        """
        return await self.update(platform, chat_id, by=by, persona="", wake_words=())

    async def modify(self, platform: str, chat_id: str, *, by: str, change: Change) -> ChatSettings:
        """Apply `change(current)` in one transaction, the row locked while it runs.

        For read-modify-write changes (add one wake word): `change` may raise
        ChatSettingsError to refuse, and then nothing is written.
        """
        check_key("chat settings", platform, chat_id)
        author = _check_author(by)
        where = (ChatSettingsRow.platform == platform, ChatSettingsRow.chat_id == chat_id)
        ensure = (
            self._insert(ChatSettingsRow)
            .values(
                platform=platform,
                chat_id=chat_id,
                enabled=True,
                allowed=None,
                persona="",
                wake_words=[],
                updated_by=author,
                updated_at=utcnow(),
            )
            .on_conflict_do_nothing(index_elements=["platform", "chat_id"])
        )
        locked = select(*_COLUMNS).where(*where).with_for_update()

        def write(conn: Connection) -> ChatSettings:
            conn.execute(ensure)
            current = _settings(conn.execute(locked).one())
            values = _checked(change(current))
            values.update(updated_by=author, updated_at=utcnow())
            conn.execute(update(ChatSettingsRow).where(*where).values(**values))
            if "wake_words" in values:
                values["wake_words"] = tuple(values["wake_words"])
            return replace(current, **values)

        return await self._db.write(write)

    async def listing(self, limit: int = 100, after_id: int | None = None) -> list[ChatSettings]:
        """Chats with stored settings in row order, `limit` at a time after `after_id`."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise ValueError(f"limit must be a non-negative integer, not {limit!r}")
        query = select(*_COLUMNS).order_by(ChatSettingsRow.id).limit(limit)
        if after_id is not None:
            query = query.where(ChatSettingsRow.id > after_id)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [_settings(row) for row in rows]


__all__ = [
    "PERSONA_MAX_CHARS",
    "WAKE_WORDS_MAX",
    "WAKE_WORD_MAX_CHARS",
    "Change",
    "ChatSettings",
    "ChatSettingsError",
    "ChatSettingsStore",
    "check_persona",
    "check_wake_words",
]
