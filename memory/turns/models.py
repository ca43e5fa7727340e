"""The tables of the conversation: turns, and the durable intake of triggered messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from memory.chats.models import ChatAddress
from memory.db.base import Base, BigIdKey
from memory.db.rows import ID_LEN, KIND_LEN, NAME_LEN, UTCDateTime, utcnow


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


TURN_STATES = ("pending", "answered", "delivered", "failed", "expired")
OPEN_STATES = ("pending", "answered")  # what recovery still has to do something about
OPEN_STATE_SQL = text("state IN ('pending', 'answered')")


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
    # The replica that accepted the message (PostgreSQL daemons): while it lives, only it
    # answers the row, so another replica's recovery never starts a message queued there.
    owner: Mapped[str | None] = mapped_column(String(64))
