"""The warnings and errors the daemon logged lately, for the console's overview.

A logging handler that keeps the last records at WARNING and above in a bounded buffer
owned by the App (attached at start, removed at stop). The log never holds a secret, so
neither does this; messages may quote user text and are escaped where shown.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime

KEPT = 200


@dataclass(frozen=True)
class LogLine:
    at: datetime
    level: str
    logger: str
    message: str


class RecentErrors(logging.Handler):
    def __init__(self, kept: int = KEPT) -> None:
        super().__init__(level=logging.WARNING)
        self._lines: deque[LogLine] = deque(maxlen=kept)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not break logging
            message = str(record.msg)
        if record.exc_info and record.exc_info[0] is not None:
            message += f" ({record.exc_info[0].__name__})"
        at = datetime.fromtimestamp(record.created, UTC)
        self._lines.append(LogLine(at, record.levelname, record.name, message[:2000]))

    def since(self, moment: datetime) -> list[LogLine]:
        """Newest first."""
        return [line for line in reversed(self._lines) if line.at >= moment]
