"""SQLAlchemy ORM models: the shape the Alembic migrations create, kept in one place.

The migrations under memory/migrations are the source of the schema; these models
describe the same tables so queries are typed and autogenerate can diff against them
(tests/test_storage.py checks that models and migrations agree). The checks below say
what fits in a row, so bad input is refused with a clear message before any write.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from memory.rows import (
    AUTHOR_LEN,
    ID_LEN,
    KIND_LEN,
    NAME_LEN,
    PLATFORM_LEN,
    BigId,
    UTCDateTime,
    utcnow,
)

# Stable constraint names, so later migrations (and SQLite batch mode) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class BigIdKey:
    """`id`, a 64-bit primary key: BIGINT on PostgreSQL, and on SQLite the INTEGER that
    is the rowid (memory.rows.BigId): the key of every table whose rows keep coming
    (turns, accepted messages, usage, tool calls, reminders, jobs, knowledge)."""

    id: Mapped[int] = mapped_column(BigId, primary_key=True)


class User(Base):
    """A person on one platform; long-term memory hangs off this row."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("platform", "platform_user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    platform_user_id: Mapped[str] = mapped_column(String(ID_LEN))
    display_name: Mapped[str | None] = mapped_column(String(NAME_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Chat(Base):
    """A private or group conversation on one platform; history hangs off this row.

    `title`, `last_active_at` and `turn_count` are kept by the transaction that stores
    turns (memory/store.py), so the console lists chats busiest first from one index.
    """

    __tablename__ = "chats"
    __table_args__ = (
        UniqueConstraint("platform", "platform_chat_id"),
        Index("ix_chats_last_active", "last_active_at", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    platform_chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    chat_type: Mapped[str] = mapped_column(String(KIND_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # A group's name where the platform says it; a private chat's: the person's name.
    title: Mapped[str | None] = mapped_column(String(NAME_LEN))
    last_active_at: Mapped[datetime] = mapped_column(
        UTCDateTime(), default=utcnow, server_default="1970-01-01 00:00:00"
    )
    turn_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class TurnRow(BigIdKey, Base):
    """One stored turn. The id orders a chat's turns; (chat, id) is the history index."""

    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("chat_id", "platform_message_id"),
        Index("ix_turns_chat_id_id", "chat_id", "id"),
        # A chat's newest summary (compaction) without walking its whole history.
        Index(
            "ix_turns_summaries",
            "chat_id",
            "id",
            sqlite_where=text("kind = 'summary'"),
            postgresql_where=text("kind = 'summary'"),
        ),
        # Never reuse an id after a delete: ids are how callers refer to turns and memories.
        {"sqlite_autoincrement": True},
    )

    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    sender_user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    role: Mapped[str] = mapped_column(String(KIND_LEN))
    kind: Mapped[str] = mapped_column(String(KIND_LEN))
    content: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    platform_message_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class MemoryRow(Base):
    """A long-term fact about one user; content_hash makes duplicates impossible."""

    __tablename__ = "memories"
    __table_args__ = (
        UniqueConstraint("user_id", "content_hash"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    author: Mapped[str] = mapped_column(String(AUTHOR_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


# -- durable intake: every triggered message, from accepted to delivered --

TURN_STATES = ("pending", "answered", "delivered", "failed", "expired")
OPEN_STATES = ("pending", "answered")  # what recovery still has to do something about
OPEN_STATE_SQL = text("state IN ('pending', 'answered')")


class ChatAddress:
    """The chat a message came from or a reminder goes to, by the platform's own id and
    kind as the message named them (intake and reminders share these columns)."""

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    chat_type: Mapped[str] = mapped_column(String(KIND_LEN))


class IntakeRow(ChatAddress, BigIdKey, Base):
    """A triggered message the daemon accepted, and how far its answer got.

    Written before any slow step (images, the model, search), so a crash at any point
    leaves a row that recovery can finish: `pending` is answered again, `answered` is
    delivered again. The conversation itself stays in `turns`; this row points at the
    user turn and the reply turn once they exist.
    """

    __tablename__ = "intake"
    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "platform_message_id"),
        # The recovery query: open rows only, oldest first, without walking closed ones.
        Index(
            "ix_intake_open",
            "state",
            "id",
            sqlite_where=OPEN_STATE_SQL,
            postgresql_where=OPEN_STATE_SQL,
        ),
        {"sqlite_autoincrement": True},
    )

    sender_id: Mapped[str] = mapped_column(String(ID_LEN))
    sender_name: Mapped[str] = mapped_column(String(NAME_LEN))
    platform_message_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    thread_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    text: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    user_turn_id: Mapped[int | None] = mapped_column(BigInteger)
    reply_turn_id: Mapped[int | None] = mapped_column(BigInteger)
    delivery: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ChatOwnerRow(Base):
    """Who first used a chat id that callers name freely (HTTP threads): theirs alone.

    `named_id` is the id as the caller named it; the row is written once, by the first
    request (insert-if-absent), and never changes (memory/chat_owners.py, migration 0010).
    """

    __tablename__ = "chat_owners"
    __table_args__ = (UniqueConstraint("platform", "named_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    named_id: Mapped[str] = mapped_column(String(ID_LEN))
    owner_id: Mapped[str] = mapped_column(String(ID_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


# -- operator controls: per-chat switches and settings, and what the model costs --


class ChatSettingsRow(Base):
    """What admins set for one chat at run time (`/bot ...`), shared by replicas.

    `allowed` overrides `[access] allowed_groups` for this chat: True after `/bot allow`,
    False after `/bot deny`, None when the config decides. `enabled` False is `/bot off`.
    """

    __tablename__ = "chat_settings"
    __table_args__ = (UniqueConstraint("platform", "chat_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    allowed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    persona: Mapped[str] = mapped_column(Text, default="")
    wake_words: Mapped[list[str]] = mapped_column(JSON, default=list)
    timezone: Mapped[str | None] = mapped_column(String(64), nullable=True)  # 0009
    chime: Mapped[str | None] = mapped_column(String(8), nullable=True)  # 0013
    updated_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


USAGE_PURPOSES = ("reply", "vision", "compaction", "transcription", "speech", "image")


class UsageRow(BigIdKey, Base):
    """Tokens spent per (day, platform, chat, user, model, purpose), added to in place.

    One row per key and day keeps `/usage`, quotas and the console's charts to small
    indexed sums however many messages there were. `estimated_calls` counts calls whose
    API gave no usage, so our own exact count was used instead.
    """

    __tablename__ = "usage"
    __table_args__ = (
        UniqueConstraint("day", "platform", "chat_id", "user_id", "model", "purpose"),
        Index("ix_usage_user_day", "platform", "user_id", "day"),
        Index("ix_usage_chat_day", "platform", "chat_id", "day"),
    )

    day: Mapped[date] = mapped_column(Date)  # UTC
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_id: Mapped[str] = mapped_column(String(ID_LEN))
    model: Mapped[str] = mapped_column(String(NAME_LEN))
    purpose: Mapped[str] = mapped_column(String(KIND_LEN))
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    estimated_calls: Mapped[int] = mapped_column(Integer, default=0)
    # Of prompt_tokens, what the provider reported serving from its prompt cache (0007).
    cached_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class ToolCallRow(BigIdKey, Base):
    """One call of a tool from an MCP server: who asked, how long it took, how it ended.

    Why rows and not counters: an operator investigating "who made the bot do that"
    needs the individual call, its sender and its chat (the console shows recent ones).
    """

    __tablename__ = "tool_calls"
    __table_args__ = (Index("ix_tool_calls_created", "created_at"),)

    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    server: Mapped[str] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(NAME_LEN))
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_id: Mapped[str] = mapped_column(String(ID_LEN))
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    outcome: Mapped[str] = mapped_column(String(KIND_LEN))
