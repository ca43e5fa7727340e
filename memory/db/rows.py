"""What fits in a row, said once: column lengths, the UTC datetime type, and the checks
that refuse bad input with a clear ValueError before anything is written.

Why apart from the models: every store checks its input with these, and the migrations'
helpers and the models read the same lengths; the models (memory/models.py) are only the
tables.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import get_args

from sqlalchemy import BigInteger, DateTime, Integer, Text
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from memory.service import normalise_memory
from memory.types import NewTurn, Role, TurnKind

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


# -- the knowledge base (migration 0012) --

KNOWLEDGE_STATES = ("pending", "indexing", "ready", "failed")
GLOBAL_SCOPE = "global"  # documents every chat's turns search
SCOPE_LEN = PLATFORM_LEN + 1 + ID_LEN  # "platform:chat_id", 161
HASH_LEN = 64  # sha256, hex
# The keyword index: on SQLite the FTS5 table `knowledge_fts` (made by migration 0012,
# outside these models: a virtual table has no ORM shape); on PostgreSQL a tsvector
# column of the chunk under a GIN index. Both index the pre-segmented `terms`.
KNOWLEDGE_FTS = "knowledge_fts"
TermsVector = Text().with_variant(TSVECTOR(), "postgresql")


def described_by_models(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's `include_name`: False for the FTS5 table and its shadow tables, which the
    migrations make and these models cannot describe (autogenerate and the schema test
    compare everything else)."""
    return not (type_ == "table" and (name or "").startswith(KNOWLEDGE_FTS))
