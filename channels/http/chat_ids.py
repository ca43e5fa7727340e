"""The chat id the daemon stores for an HTTP request: private chats, threads and groups
kept apart by kind.

Why: HTTP callers name chats freely. When a group request could name "bob" and so create
the chat a private request of Bob's would use, Bob was locked out of his own chat (or his
history reached the group). Now the kinds never share an id:

- a group `X` is stored as `group:X`;
- a person's own private chat (no `chat_id`, or `chat_id` equal to `user_id`) is stored as
  the user id itself, as before (`private:<user_id>` when the id itself starts with one of
  these prefixes, so it cannot pose as the other kinds);
- any other private `chat_id` `X` is a thread (a conversation of a client with several per
  person) stored as `thread:X`, and belongs to the user who first used it.

An id that would not fit the 128-character column keeps its prefix and is digested.
"""

from __future__ import annotations

import hashlib

GROUP, THREAD, PRIVATE = "group:", "thread:", "private:"
_PREFIXES = (GROUP, THREAD, PRIVATE)
MAX_STORED_CHARS = 128


def stored_group_id(chat_id: str) -> str:
    """A group's stored id."""
    return _fit(GROUP, chat_id)


def stored_private_id(user_id: str, chat_id: str | None) -> str:
    """A private request's stored chat id: the user's own chat, or a thread."""
    if is_own_chat(user_id, chat_id):
        return _fit(PRIVATE, user_id) if user_id.startswith(_PREFIXES) else user_id
    assert chat_id is not None
    return _fit(THREAD, chat_id)


def is_own_chat(user_id: str, chat_id: str | None) -> bool:
    """The person's own private chat: nobody else can name it."""
    return chat_id is None or chat_id == user_id


def shown_chat_id(stored: str) -> str:
    """The chat id as the caller named it (for pushes): the stored id without its kind."""
    for prefix in _PREFIXES:
        if stored.startswith(prefix):
            return stored[len(prefix) :]
    return stored


def chat_kind(stored: str) -> str:
    """ "group" or "private" (a person's own chat or one of their threads)."""
    return "group" if stored.startswith(GROUP) else "private"


def _fit(prefix: str, name: str) -> str:
    whole = prefix + name
    if len(whole) <= MAX_STORED_CHARS:
        return whole
    digest = hashlib.blake2b(name.encode(), digest_size=16, person=b"chatterd-chat").hexdigest()
    return f"{prefix}~{digest}"
