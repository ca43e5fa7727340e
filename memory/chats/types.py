"""How storage names a chat, a person, and where a record or a piece of work belongs: plain
types every domain shares (no SQLAlchemy)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class ChatKey:
    """Which chat: a platform and that platform's chat id, the one spelling everywhere.

    Written `platform:chat_id` in logs, config (`[access] allowed_groups`), commands and
    the CLI; `parse` reads that back. The chat id may itself hold colons (`qq`,
    `group:123`): only the first one separates.
    """

    platform: str
    chat_id: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.chat_id}"

    @classmethod
    def parse(cls, text: str) -> ChatKey:
        platform, sep, chat_id = text.strip().partition(":")
        if not sep or not platform or not chat_id:
            raise ValueError(f"{text!r} is not a chat key: write platform:chat_id")
        return cls(platform, chat_id)


def person_key(platform: str, user_id: str) -> str:
    """Which person: `platform:user_id`, the one spelling of a person as ChatKey is of a
    chat (access lists and admins, memory and quotas, a reminder's owner, a job's asker)."""
    return f"{platform}:{user_id}"


class InChat:
    """A record that belongs to one chat: its `platform` and `chat_id` name it."""

    platform: str
    chat_id: str

    @property
    def chat_key(self) -> ChatKey:
        return ChatKey(self.platform, self.chat_id)


@dataclass(frozen=True)
class WorkOrigin(InChat):
    """Work that outlives a turn (a reminder, a job) and where it was asked for: its kind,
    the chat, and, by name only, the thread and the message that asked (in a group the
    answer quotes it). Drafts and stored records of every kind share these fields."""

    kind: str
    platform: str
    chat_id: str
    chat_type: str  # "private" | "group"
    _: KW_ONLY
    thread_id: str | None = None
    origin_message_id: str | None = None

    def origin_columns(self) -> dict[str, Any]:
        """These fields by name: a store writes them to the row's columns of those names."""
        return {f.name: getattr(self, f.name) for f in fields(WorkOrigin)}
