"""Trigger policy: when does a message get an answer?

Private chats always; groups when the bot is @-mentioned, replied to, called by a wake
word (the bot's name always counts; a group may add its own with `/bot wake`), or given
a command. Everything else in a group is only context.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.messages import ChatType, InboundMessage


def is_command(text: str) -> bool:
    """A command is a slash and a word at the very start: `/help`, `/memory add x`."""
    return bool(re.match(r"/[A-Za-z][\w-]*(?:@\w+)?(?:\s|$)", text.lstrip()))


@dataclass(frozen=True)
class TriggerPolicy:
    wake_words: tuple[str, ...]

    @classmethod
    def create(cls, bot_name: str, wake_words: Iterable[str]) -> TriggerPolicy:
        words = {w.strip().casefold() for w in (bot_name, *wake_words) if w.strip()}
        return cls(tuple(sorted(words, key=len, reverse=True)))

    def triggers(self, message: InboundMessage, extra_wake_words: Sequence[str] = ()) -> bool:
        """`extra_wake_words`: this group's own (`/bot wake`), besides the configured ones."""
        if message.chat_type is ChatType.PRIVATE:
            return True
        if message.mentions_bot or message.reply_to_bot or is_command(message.text):
            return True
        return self.has_wake_word(message.text, extra_wake_words)

    def has_wake_word(self, text: str, extra: Sequence[str] = ()) -> bool:
        folded = text.casefold()
        if any(_contains_word(folded, word) for word in self.wake_words):
            return True
        return any(_contains_word(folded, w.strip().casefold()) for w in extra if w.strip())


def _contains_word(text: str, word: str) -> bool:
    """Whole-word match for Latin names ("chatterd," yes, "chatterdog" no); CJK has no
    spaces between words, so there a substring is the word."""
    if not word.isascii():
        return word in text
    return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None
