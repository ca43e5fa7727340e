"""Who may use the console: the password, sessions, CSRF tokens and the sign-in limit.

Why sessions in memory: signing out must end the session at once (a signed cookie would
stay valid until it expires), and the console is one operator's tool on one daemon. A
restart signs everyone out; with several replicas, send the console to one of them.

The session cookie is HttpOnly and SameSite=Strict, so neither a script on the page nor
another site can use it; each session has its own CSRF token that every form posts back.
Failed sign-ins are counted per client address and in total, so guessing the password
from one address or from many is slow.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.clock import WallClock, utc_now
from core.window import SlidingWindow

MAX_SESSIONS = 64  # the oldest is signed out when more sign in
FAILURES_PER_ADDRESS = 5  # wrong passwords from one address per window, then refused
FAILURES_TOTAL = 30  # wrong passwords from all addresses per window, then refused
FAILURE_WINDOW = timedelta(minutes=5)


def password_matches(given: str, expected: str) -> bool:
    """Constant-time comparison of digests, so neither length nor prefix leaks."""
    digest = hashlib.sha256
    return hmac.compare_digest(
        digest(given.encode("utf-8", "replace")).digest(),
        digest(expected.encode("utf-8", "replace")).digest(),
    )


@dataclass
class Session:
    token: str
    csrf: str
    expires: datetime
    flash: str | None = None  # a result to show on the next page


class Sessions:
    """Signed-in browsers by cookie token; bounded, each expiring `lifetime` after sign-in."""

    def __init__(self, lifetime: timedelta, clock: WallClock = utc_now) -> None:
        self._lifetime = lifetime
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def open(self) -> Session:
        session = Session(
            token=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            expires=self._clock() + self._lifetime,
        )
        self._sessions[session.token] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session

    def find(self, token: str | None) -> Session | None:
        if not token:
            return None
        session = self._sessions.get(token)
        if session is None:
            return None
        if session.expires <= self._clock():
            del self._sessions[token]
            return None
        return session

    def close(self, token: str | None) -> None:
        if token:
            self._sessions.pop(token, None)

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_matches(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf.encode(), (given or "").encode())


class SignInLimiter:
    """Counts failed sign-ins per address and in total (core/window.py's counter)."""

    _EVERYONE = ""  # the key under which every address's failures are counted together

    def __init__(self, clock: WallClock = utc_now) -> None:
        def seconds() -> float:
            return clock().timestamp()

        window_s = FAILURE_WINDOW.total_seconds()
        self._failures: SlidingWindow[str] = SlidingWindow(window_s, clock=seconds)
        self.refused_total = 0  # wrong passwords and attempts refused while limited

    def blocked(self, address: str) -> bool:
        """True while this address (or everyone) has failed too often lately."""
        return self.retry_after_s(address) > 0

    def failed(self, address: str) -> None:
        self._failures.add(address)
        self._failures.add(self._EVERYONE)
        self.refused_total += 1

    def retry_after_s(self, address: str) -> int:
        """Whole seconds until this address may try again (0: now)."""
        left = max(
            self._failures.wait_s(address, limit=FAILURES_PER_ADDRESS),
            self._failures.wait_s(self._EVERYONE, limit=FAILURES_TOTAL),
        )
        return int(left) + 1 if left > 0 else 0
