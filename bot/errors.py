"""Errors a user may see: each carries a short, safe sentence, never a stack trace."""

from __future__ import annotations


class UserFacingError(Exception):
    """Base: `user_message` is safe to send to a chat; str(exc) is for the operator log."""

    user_message = "Sorry, something went wrong on my side. Please try again in a moment."

    def __init__(self, detail: str = "", user_message: str | None = None) -> None:
        super().__init__(detail or self.user_message)
        if user_message is not None:
            self.user_message = user_message


class ModelUnavailable(UserFacingError):
    user_message = "Sorry, I can't reach my language model right now. Please try again shortly."


class ModelBusy(UserFacingError):
    user_message = "Sorry, I'm getting too many requests right now. Please try again in a minute."


class ShuttingDown(UserFacingError):
    user_message = "I'm restarting right now; please send that again in a moment."


class PermissionDenied(UserFacingError):
    user_message = "Only the bot's admins can do that."


class StartupError(Exception):
    """Stops the daemon with exit status 2 and this one line (config, missing model...)."""
