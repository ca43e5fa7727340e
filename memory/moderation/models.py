"""The moderation tables (migration 0014): each group's rules, the action log, when members
joined, and the proposals made for reported messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base, BigIdKey
from memory.db.rows import AUTHOR_LEN, ID_LEN, KIND_LEN, NAME_LEN, PLATFORM_LEN, UTCDateTime, utcnow


class ModRulesRow(BigIdKey, Base):
    """One group's rules as one JSON value (memory.moderation.types.GroupRules): read whole
    and cached, written whole by `/mod`."""

    __tablename__ = "mod_rules"
    __table_args__ = (UniqueConstraint("platform", "chat_id"), {"sqlite_autoincrement": True})

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    rules: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(AUTHOR_LEN), default="")


class ModActionRow(BigIdKey, Base):
    """An action, written before the platform is asked. The unique key is what keeps it
    from being taken twice: a second process, or this one after a kill -9, cannot record
    it again, so it never asks the platform again."""

    __tablename__ = "mod_actions"
    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "key"),
        Index("ix_mod_actions_chat", "platform", "chat_id", "id"),
        {"sqlite_autoincrement": True},
    )

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    key: Mapped[str] = mapped_column(String(NAME_LEN))
    user_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_name: Mapped[str] = mapped_column(String(NAME_LEN))
    kind: Mapped[str] = mapped_column(String(KIND_LEN))
    seconds: Mapped[int] = mapped_column(Integer, default=0)
    message_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    reason: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(AUTHOR_LEN))
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    detail: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ModMemberRow(BigIdKey, Base):
    """When a member joined a group (the newcomers' link rule), as the platform said it."""

    __tablename__ = "mod_members"
    __table_args__ = (
        UniqueConstraint("platform", "chat_id", "user_id"),
        {"sqlite_autoincrement": True},
    )

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_id: Mapped[str] = mapped_column(String(ID_LEN))
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ModProposalRow(BigIdKey, Base):
    """The model's proposal for a reported message; acted on only after an admin's approve
    (the conditional UPDATE from `open` is the one decision)."""

    __tablename__ = "mod_proposals"
    __table_args__ = (
        Index("ix_mod_proposals_chat", "platform", "chat_id", "id"),
        {"sqlite_autoincrement": True},
    )

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))
    reporter_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_id: Mapped[str] = mapped_column(String(ID_LEN))
    user_name: Mapped[str] = mapped_column(String(NAME_LEN))
    message_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    text: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(KIND_LEN))
    seconds: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(KIND_LEN))
    decided_by: Mapped[str | None] = mapped_column(String(AUTHOR_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
