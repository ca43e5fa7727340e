"""SQLAlchemy ORM models: the shape the Alembic migrations create, kept in one place.

The migrations under memory/migrations are the source of the schema; these models
describe the same tables so queries are typed and autogenerate can diff against them
(tests/test_storage.py checks that models and migrations agree). The checks below say
what fits in a row, so bad input is refused with a clear message before any write.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime
from typing import Any, get_args

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from memory.service import normalise_memory
from memory.types import NewTurn, Role, TurnKind

# Stable constraint names, so later migrations (and SQLite batch mode) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Lengths are enforced in Python too (store.py) so callers get a clear ValueError. How long
# a memory may be is a rule of memory.service, not of the row (content is TEXT).
PLATFORM_LEN = 32
ID_LEN = 128
NAME_LEN = 256
AUTHOR_LEN = 200
KIND_LEN = 16
ROLES = frozenset(get_args(Role))
KINDS = frozenset(get_args(TurnKind))
CHAT_TYPES = frozenset({"private", "group"})

# SQLite only aliases rowid for INTEGER PRIMARY KEY, so BIGINT must become INTEGER there.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    PostgreSQL keeps the zone (timestamptz); SQLite stores text without one, so values
    are normalised to UTC on the way in and get UTC attached on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def utc(value: datetime | None) -> datetime:
    """`value` in UTC (naive means UTC already); now when None."""
    if value is None:
        return datetime.now(UTC)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# -- what fits in a row: checked before any write, so a caller gets a clear ValueError --


def clean_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL; replace it on every backend so both agree."""
    return value.replace("\x00", "\ufffd")


def check_key(what: str, platform: object, ident: object) -> None:
    if not isinstance(platform, str) or not platform or len(platform) > PLATFORM_LEN:
        raise ValueError(f"{what}: platform must be 1..{PLATFORM_LEN} characters")
    if not isinstance(ident, str) or not ident or len(ident) > ID_LEN:
        raise ValueError(f"{what}: id must be 1..{ID_LEN} characters")


def check_turn(turn: NewTurn) -> None:
    """Reject a malformed turn before anything is written, naming what is wrong."""
    check_key("turn chat", turn.platform, turn.chat_id)
    if turn.sender_id is not None:
        check_key("turn sender", turn.platform, turn.sender_id)
    if turn.chat_type not in CHAT_TYPES:
        raise ValueError(f"turn: chat_type must be private or group, not {turn.chat_type!r}")
    if turn.role not in ROLES:
        raise ValueError(f"turn: role must be one of {sorted(ROLES)}, not {turn.role!r}")
    if turn.kind not in KINDS:
        raise ValueError(f"turn: kind must be one of {sorted(KINDS)}, not {turn.kind!r}")
    if not isinstance(turn.content, str):
        raise ValueError("turn: content must be text")
    if turn.sender_name is not None and not isinstance(turn.sender_name, str):
        raise ValueError("turn: sender_name must be text")
    count = turn.token_count
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count < 2**31:
        raise ValueError(f"turn: token_count must be a non-negative integer, not {count!r}")
    pmid = turn.platform_message_id
    if pmid is not None and (not isinstance(pmid, str) or not pmid or len(pmid) > ID_LEN):
        raise ValueError(f"turn: platform_message_id must be 1..{ID_LEN} characters")
    if not isinstance(turn.meta, dict):
        raise ValueError("turn: meta must be a dict")
    if turn.created_at is not None and not isinstance(turn.created_at, datetime):
        raise ValueError("turn: created_at must be a datetime")


def memory_hash(content: str) -> str:
    """The unique key of a memory row: the same memory (memory.service) hashes the same."""
    return hashlib.sha256(normalise_memory(content).encode()).hexdigest()


def memory_text(content: object, where: str = "memory") -> str:
    """A memory's stored text: stripped and non-empty (its limits are memory.service's)."""
    if not isinstance(content, str):
        raise ValueError(f"{where}: content must be text")
    cleaned = clean_text(content.strip())
    if not cleaned:
        raise ValueError(f"{where}: content is empty")
    return cleaned


def memory_author(author: object, where: str = "memory") -> str:
    if not isinstance(author, str) or not author.strip() or len(author.strip()) > AUTHOR_LEN:
        raise ValueError(f"{where}: author must be 1..{AUTHOR_LEN} characters")
    return clean_text(author.strip())


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


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


class TurnRow(Base):
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

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
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


class IntakeRow(ChatAddress, Base):
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

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
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
    updated_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


USAGE_PURPOSES = ("reply", "vision", "compaction", "transcription", "speech")


class UsageRow(Base):
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

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
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


class ToolCallRow(Base):
    """One call of a tool from an MCP server: who asked, how long it took, how it ended.

    Why rows and not counters: an operator investigating "who made the bot do that"
    needs the individual call, its sender and its chat (the console shows recent ones).
    """

    __tablename__ = "tool_calls"
    __table_args__ = (Index("ix_tool_calls_created", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    server: Mapped[str] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(NAME_LEN))
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_id: Mapped[str] = mapped_column(String(ID_LEN))
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    outcome: Mapped[str] = mapped_column(String(KIND_LEN))


# -- reminders and scheduled tasks (migration 0009) --

REMINDER_KINDS = ("remind", "task")
REMINDER_STATES = ("active", "done", "missed", "cancelled")
RUN_STATES = ("claimed", "delivered", "late", "missed", "failed", "skipped")


class ReminderRow(ChatAddress, Base):
    """A reminder (`/remind`) or a scheduled model turn (`/schedule`) of one person in
    one chat. `next_due_at` is the occurrence still to come (None once finished); the
    claim of an occurrence is the conditional UPDATE that moves it on (memory/reminders.py).
    """

    __tablename__ = "reminders"
    __table_args__ = (
        Index("ix_reminders_due", "state", "next_due_at"),
        Index("ix_reminders_chat", "platform", "chat_id", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    kind: Mapped[str] = mapped_column(String(KIND_LEN))
    thread_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    owner_id: Mapped[str] = mapped_column(String(ID_LEN))
    owner_name: Mapped[str] = mapped_column(String(NAME_LEN))
    origin_message_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    text: Mapped[str] = mapped_column(Text)
    rule: Mapped[str] = mapped_column(String(NAME_LEN))
    zone: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    next_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_outcome: Mapped[str | None] = mapped_column(String(KIND_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")


class ReminderRunRow(Base):
    """One occurrence of a reminder: claimed once (the unique key), then delivered, late,
    missed, failed or skipped. A `claimed` row whose claimer died is recovery's to finish."""

    __tablename__ = "reminder_runs"
    __table_args__ = (
        UniqueConstraint("reminder_id", "due_at"),
        Index("ix_reminder_runs_state", "state", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    reminder_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("reminders.id", ondelete="CASCADE"),
    )
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str] = mapped_column(String(64))
    claimed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    detail: Mapped[str] = mapped_column(Text, default="")


# -- the knowledge base (migration 0011) --

KNOWLEDGE_STATES = ("pending", "indexing", "ready", "failed")
GLOBAL_SCOPE = "global"  # documents every chat's turns search
SCOPE_LEN = PLATFORM_LEN + 1 + ID_LEN  # "platform:chat_id", 161
HASH_LEN = 64  # sha256, hex
# The keyword index: on SQLite the FTS5 table `knowledge_fts` (made by migration 0011,
# outside these models: a virtual table has no ORM shape); on PostgreSQL a tsvector
# column of the chunk under a GIN index. Both index the pre-segmented `terms`.
KNOWLEDGE_FTS = "knowledge_fts"
TermsVector = Text().with_variant(TSVECTOR(), "postgresql")


def described_by_models(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's `include_name`: False for the FTS5 table and its shadow tables, which the
    migrations make and these models cannot describe (autogenerate and the schema test
    compare everything else)."""
    return not (type_ == "table" and (name or "").startswith(KNOWLEDGE_FTS))


class KnowledgeDocumentRow(Base):
    """One document in one scope (a chat's "platform:chat_id", or "global").

    `state` is how far ingestion got: `indexing` from the moment it is accepted (the
    parsed `pages` kept here so a restarted process can finish or retry it), `ready` in
    the one transaction that writes all its chunks and vectors, `failed` with `error`.
    Unique on (scope, content hash): the same text twice in one scope is one document.
    """

    __tablename__ = "knowledge_documents"
    __table_args__ = (
        UniqueConstraint("scope", "content_hash"),
        Index("ix_knowledge_documents_scope_state", "scope", "state"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scope: Mapped[str] = mapped_column(String(SCOPE_LEN))
    source: Mapped[str] = mapped_column(String(NAME_LEN))
    content_hash: Mapped[str] = mapped_column(String(HASH_LEN))
    size_bytes: Mapped[int] = mapped_column(Integer)
    pages: Mapped[list[Any]] = mapped_column(JSON, default=list)
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    added_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class KnowledgeChunkRow(Base):
    """One passage of a ready document. Chunks exist only while their document is ready:
    written in the transaction that makes it so, deleted in the one that removes it."""

    __tablename__ = "knowledge_chunks"
    __table_args__ = (
        Index("ix_knowledge_chunks_document_id", "document_id", "ordinal"),
        Index("ix_knowledge_chunks_scope", "scope"),
        Index("ix_knowledge_chunks_terms_vector", "terms_vector", postgresql_using="gin"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    document_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("knowledge_documents.id", ondelete="CASCADE"),
    )
    scope: Mapped[str] = mapped_column(String(SCOPE_LEN))
    ordinal: Mapped[int] = mapped_column(Integer)
    locator: Mapped[str] = mapped_column(String(NAME_LEN), default="")
    text: Mapped[str] = mapped_column(Text)
    terms: Mapped[str] = mapped_column(Text)
    terms_vector: Mapped[Any] = mapped_column(TermsVector, nullable=True)


class KnowledgeVectorRow(Base):
    """A chunk's embedding by one model: float32 bytes, with the model and dimension that
    made them, so a changed model is re-embedded instead of compared with the old."""

    __tablename__ = "knowledge_vectors"
    __table_args__ = (Index("ix_knowledge_vectors_scope_model", "scope", "model"),)

    chunk_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("knowledge_chunks.id", ondelete="CASCADE"),
        primary_key=True,
    )
    model: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    scope: Mapped[str] = mapped_column(String(SCOPE_LEN))
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
