"""The console's query and form values, checked before they reach a query or a header.

Why: a page number like `²` passes str.isdigit() but not int(); a 30-digit one passes
int() but overflows the database's 64-bit ids; a CR/LF in a redirect target cannot go
into a Location header. Each is a `BadInput` the guard turns into a 400 page that says
what was wrong, never a 500.
"""

from __future__ import annotations

from datetime import UTC, datetime

MAX_ROW_ID = 2**63 - 1  # ids are 64-bit signed on PostgreSQL and SQLite alike
MAX_TARGET_CHARS = 2048
PREFIX = "/console"


class BadInput(Exception):
    """A value in the URL or a form the console cannot use; its text is shown to the user."""


def row_id(value: str | None, key: str) -> int | None:
    """A page's row id (`before`, `after`): None when absent, else 1..2**63-1 in ASCII digits."""
    if not value:
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= 19):
        raise BadInput(f"{key} must be a row number")
    number = int(value)
    if not 0 < number <= MAX_ROW_ID:
        raise BadInput(f"{key} must be a row number")
    return number


def chat_cursor(value: str | None, key: str) -> str | None:
    """The chats page cursor `<ISO time>~<row id>` (memory/console/browse.py writes it), checked."""
    if not value:
        return None
    when, sep, pk = value.rpartition("~")
    if not sep or len(when) > 64:
        raise BadInput(f"{key} is not a page of this list")
    row_id(pk, key)
    try:
        moment = datetime.fromisoformat(when)
        if moment.tzinfo is not None:
            moment.astimezone(UTC)  # offsets near the ends of time overflow here
    except (ValueError, OverflowError):
        raise BadInput(f"{key} is not a page of this list") from None
    return value


def sign_in_target(value: str | None) -> str:
    """Where to go after signing in: "" for the overview, else a path of this console.

    Anything that is not a plain printable path under /console/ (another host `//x`, a
    backslash, CR/LF or other control characters, over-long) is refused.
    """
    if not value:
        return ""
    if (
        len(value) > MAX_TARGET_CHARS
        or not value.isascii()
        or not value.isprintable()
        or "\\" in value
        or not value.startswith(f"{PREFIX}/")
        or value.startswith(f"{PREFIX}//")
    ):
        raise BadInput("the page to return to after signing in is not a console page")
    return value
