"""Pushing to an HTTP integration: a message nobody's request is waiting for.

The HTTP API answers in its response, so a reminder (or a scheduled task's answer) has
nowhere to go unless the operator names one: `[http] push_url` gets a POST with
`{"chat_id", "chat_type", "text", "reminder_id", "occurrence_id", "sent_at"}` as JSON
(`chat_id` as the caller named it: the daemon stores HTTP groups and threads under a
kind prefix, channels/http/chat_ids.py). When `[http]
token` is set, the body is signed: `X-Chatterd-Signature: sha256=<hex HMAC-SHA256 of the
raw body with the token as key>`, so the receiver can tell the POST is ours without
another secret. Any answer but 2xx is a DeliveryError, and the scheduler tries again.

Why `occurrence_id` (also sent as the conventional `Idempotency-Key` header): a POST the
receiver took whose answer never reached a daemon that then died is sent again by the
next process, with a late note and a new `sent_at`. The id (reminder id and due time) is
the same on both, and it is inside the signed body, so the receiver can drop the repeat.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import aiohttp

from channels.http.chat_ids import chat_kind, shown_chat_id
from core.messages import DeliveryError, OutboundMessage, Sent

SIGNATURE_HEADER = "X-Chatterd-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
TIMEOUT_S = 10.0


def signature(token: bytes, body: bytes) -> str:
    """The header value for `body`: `sha256=` and the hex HMAC-SHA256 keyed by `token`."""
    return "sha256=" + hmac.new(token, body, hashlib.sha256).hexdigest()


class HttpPush:
    """POSTs proactive messages to one configured URL."""

    def __init__(self, url: str, token: bytes | None, *, timeout_s: float = TIMEOUT_S) -> None:
        self._url = url
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def send(self, message: OutboundMessage) -> Sent:
        body = json.dumps(
            {
                "chat_id": shown_chat_id(message.chat_id),
                "chat_type": chat_kind(message.chat_id),
                "text": message.text,
                "reminder_id": message.reminder_id,
                "occurrence_id": message.occurrence_id,
                "sent_at": datetime.now(UTC).isoformat(),
            },
            ensure_ascii=False,
        ).encode()
        headers = {"Content-Type": "application/json"}
        if message.occurrence_id is not None:
            headers[IDEMPOTENCY_HEADER] = message.occurrence_id
        if self._token is not None:
            headers[SIGNATURE_HEADER] = signature(self._token, body)
        try:
            async with aiohttp.ClientSession(timeout=self._timeout) as session:
                async with session.post(self._url, data=body, headers=headers) as response:
                    if not 200 <= response.status < 300:
                        raise DeliveryError(f"http push: the push URL answered {response.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"http push: {type(exc).__name__}") from None
        return Sent()
