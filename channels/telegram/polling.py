"""Long-polling liveness: know when getUpdates last worked, and restart it when it stops.

Why: a long poll can stop silently (a half-open TCP connection, a dead polling task,
another instance stealing the token with 409 Conflict), and then the process looks alive
and answers nobody. The request layer reports every getUpdates outcome to a PollMonitor,
and a PollSupervisor restarts the updater, with backoff, when no poll has succeeded for
`poll_stall_s`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from telegram import Update
from telegram.error import InvalidToken, TelegramError
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from core.clock import Ticker

log = logging.getLogger(__name__)

JSONDict = dict[str, Any]

CONFLICT = "409 Conflict"
INVALID_TOKEN = "token rejected"
CONFLICT_HELP = (
    "telegram: 409 Conflict: another process is polling this bot token (or a webhook is "
    "set for it). Only one instance may poll; stop the other one. Retrying with backoff."
)


class PollMonitor:
    """The facts about polling that health() and the supervisor read."""

    def __init__(self, *, redact: Callable[[str], str], clock: Ticker = time.monotonic):
        self._redact = redact
        self._clock = clock
        self.last_ok: datetime | None = None
        self.ok_count = 0
        self.error_streak = 0
        self.last_error: str | None = None
        self._last_ok_mono: float | None = None
        self._since = clock()

    @property
    def failing(self) -> bool:
        return self.error_streak > 0

    def mark_started(self) -> None:
        """Polling (re)started: stall time counts from now, not from before the restart."""
        self._since = self._clock()

    def stalled_for(self) -> float:
        """Seconds since the last successful poll (or the last start, if later)."""
        base = self._since if self._last_ok_mono is None else max(self._since, self._last_ok_mono)
        return self._clock() - base

    def record_ok(self) -> None:
        if self.error_streak:
            log.info("telegram: polling recovered after %d failed attempts", self.error_streak)
        self.error_streak = 0
        self.ok_count += 1
        self._last_ok_mono = self._clock()
        self.last_ok = datetime.now(UTC)

    def record_error(self, kind: str, detail: str) -> None:
        """One failed getUpdates; the first of a streak is logged, the rest go to debug."""
        self.error_streak += 1
        first = self.error_streak == 1
        self.last_error = self._redact(f"{kind}: {detail}")
        if kind == CONFLICT:
            if first:
                log.error(CONFLICT_HELP)
        elif kind == INVALID_TOKEN:
            if first:
                log.error("telegram: the Bot API rejected the token while polling")
        elif first:
            log.warning("telegram: getUpdates failed (%s); retrying", self.last_error)
        else:
            log.debug("telegram: getUpdates failed again (%s)", self.last_error)


def sanitise_updates(updates: list[Any]) -> list[Any]:
    """Replace each update python-telegram-bot cannot parse by a bare `{"update_id": n}`.

    Why: PTB parses a getUpdates batch all or nothing, so one malformed update would fail
    every poll forever (its offset is never confirmed). A bare update keeps the offset
    moving; the channel ignores it; the log says which one was dropped and why.
    """
    clean: list[Any] = []
    for item in updates:
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(update_id, int):
            log.warning(
                "telegram: ignored an update without an update_id (%s)", type(item).__name__
            )
            continue
        try:
            Update.de_json(item, None)
        except Exception as exc:  # any parse failure: the shape is not what PTB expects
            reason = f"{type(exc).__name__}: {exc}"[:200]
            log.warning("telegram: ignored malformed update %d (%s)", update_id, reason)
            item = {"update_id": update_id}
        clean.append(item)
    return clean


class PollingRequest(HTTPXRequest):
    """The getUpdates request object: reports outcomes and filters malformed updates."""

    def __init__(self, monitor: PollMonitor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._monitor = monitor

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        try:
            code, payload = await super().do_request(
                url,
                method,
                request_data,
                read_timeout,
                write_timeout,
                connect_timeout,
                pool_timeout,
            )
        except TelegramError as exc:  # network failures and timeouts
            self._monitor.record_error(type(exc).__name__, str(exc))
            raise
        if 200 <= code <= 299:
            self._monitor.record_ok()
        else:
            self._monitor.record_error(_KINDS.get(code, f"HTTP {code}"), _description(payload))
        return code, payload

    @staticmethod
    def parse_json_payload(payload: bytes) -> JSONDict:
        data = HTTPXRequest.parse_json_payload(payload)
        if isinstance(data, dict) and data.get("ok") and isinstance(data.get("result"), list):
            data["result"] = sanitise_updates(data["result"])
        return data


_KINDS = {409: CONFLICT, 401: INVALID_TOKEN, 404: INVALID_TOKEN, 429: "flood control"}


def _description(payload: bytes) -> str:
    try:
        data = json.loads(payload.decode("utf-8", "replace"))
    except ValueError:
        return payload[:200].decode("utf-8", "replace")
    return str(data.get("description", "")) if isinstance(data, dict) else ""


class PollSupervisor:
    """Brings polling up and keeps it up: restart with exponential backoff when stalled.

    `start` must be idempotent (initialize if needed, start the updater); `stop` stops
    the updater within a bounded time. `watch_stall` is off for webhooks, where a quiet
    chat sends nothing and that is fine.
    """

    def __init__(
        self,
        *,
        monitor: PollMonitor,
        start: Callable[[], Awaitable[None]],
        stop: Callable[[], Awaitable[None]],
        stall_s: float,
        check_s: float,
        backoff_s: float,
        backoff_max_s: float,
        watch_stall: bool = True,
    ) -> None:
        self._monitor = monitor
        self._start = start
        self._stop = stop
        self._stall_s = stall_s
        self._check_s = check_s
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._watch_stall = watch_stall
        self.up = False
        self.restarts = 0

    @property
    def reconnecting(self) -> bool:
        return not self.up or (self._watch_stall and self._monitor.stalled_for() > self._stall_s)

    async def run(self, *, up: bool) -> None:
        """Watch until cancelled."""
        self.up = up
        failures = 0
        ok_at_last_restart = self._monitor.ok_count
        while True:
            await asyncio.sleep(self._check_s)
            if self._monitor.ok_count != ok_at_last_restart:
                failures = 0  # a poll succeeded since the last restart: backoff resets
            stalled = self._watch_stall and self._monitor.stalled_for() > self._stall_s
            if self.up and not stalled:
                continue
            failures += 1
            delay = min(self._backoff_max_s, self._backoff_s * 2 ** (failures - 1))
            if self.up:
                log.warning(
                    "telegram: no successful getUpdates for %.1fs (last error: %s); "
                    "restarting polling in %.1fs (attempt %d)",
                    self._monitor.stalled_for(),
                    self._monitor.last_error or "none, it hung",
                    delay,
                    failures,
                )
                self.up = False
                await self._stop()
            await asyncio.sleep(delay)
            ok_at_last_restart = self._monitor.ok_count
            await self._try_start()

    async def _try_start(self) -> None:
        self.restarts += 1
        try:
            await self._start()
        except InvalidToken:
            log.error("telegram: the Bot API rejects the token; will retry, check [telegram] token")
            self._monitor.mark_started()
            return
        except (TelegramError, OSError) as exc:
            log.warning("telegram: starting polling failed (%s); will retry", type(exc).__name__)
            self._monitor.mark_started()
            return
        self._monitor.mark_started()
        self.up = True
        log.info("telegram: polling (re)started")
