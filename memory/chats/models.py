"""The tables of chats and people (users, chats, chat settings, chat owners), and the
columns by which other tables name a chat (ChatKeyColumns, ChatAddress, WorkOriginColumns)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base
from memory.db.rows import AUTHOR_LEN, ID_LEN, KIND_LEN, NAME_LEN, PLATFORM_LEN, UTCDateTime, utcnow


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
    turns (memory/turns/store.py), so the console lists chats busiest first from one index.
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


class ChatKeyColumns:
    """A chat by the platform's name and the platform's own id: the key of every table
    kept per chat (moderation's rules, actions, members and proposals)."""

    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    chat_id: Mapped[str] = mapped_column(String(ID_LEN))


class ChatAddress(ChatKeyColumns):
    """The chat a message came from or a reminder goes to, by the platform's own id and
    kind as the message named them (intake and reminders share these columns)."""

    chat_type: Mapped[str] = mapped_column(String(KIND_LEN))


class ChatOwnerRow(Base):
    """Who first used a chat id that callers name freely (HTTP threads): theirs alone.

    `named_id` is the id as the caller named it; the row is written once, by the first
    request (insert-if-absent), and never changes (memory/chats/owners.py, migration 0010).
    """

    __tablename__ = "chat_owners"
    __table_args__ = (UniqueConstraint("platform", "named_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(PLATFORM_LEN))
    named_id: Mapped[str] = mapped_column(String(ID_LEN))
    owner_id: Mapped[str] = mapped_column(String(ID_LEN))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


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


class WorkOriginColumns(ChatAddress):
    """The columns of memory.chats.types.WorkOrigin, shared by every table of such work: its
    kind, the chat (ChatAddress), the thread, and the message that asked."""

    kind: Mapped[str] = mapped_column(String(KIND_LEN))
    thread_id: Mapped[str | None] = mapped_column(String(ID_LEN))
    origin_message_id: Mapped[str | None] = mapped_column(String(ID_LEN))
