"""The tables of what things cost: token usage per day and key, and MCP tool calls."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, Date, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base, BigIdKey
from memory.db.rows import ID_LEN, KIND_LEN, NAME_LEN, PLATFORM_LEN, UTCDateTime, utcnow

USAGE_PURPOSES = ("reply", "vision", "compaction", "transcription", "speech", "image", "digest")


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
