"""Telegram through python-telegram-bot: updates in, replies out, polling or webhook."""

from channels.telegram.channel import TelegramChannel

__all__ = ["TelegramChannel"]
