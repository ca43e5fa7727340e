"""QQ files and voice messages, fetched only when the daemon reads them.

Why ask the implementation: a `record` segment's `file` is often only an id and its URL
(when there is one) serves raw SILK; NapCat's `get_record` with `out_format` hands back
a transcoded file (as base64 or a URL), `get_file` does the same for file segments. A
URL is fetched through the safe fetcher (NapCat on 127.0.0.1 must be listed in
`[onebot] allow_private_media_hosts`); a local path is never read (the implementation
may run on another machine). Without `get_record`, the segment's URL is used and the
SILK is decoded by the speech path.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable
from typing import Any

from channels.onebot.actions import AnswerTooLarge, OneBotError
from channels.onebot.message import FileSegment
from channels.onebot.transport import MAX_ANSWER_BYTES, OneBotConnection
from core.media.fetch import DownloadError, DownloadTooLarge, SafeDownloader
from core.messages import Attachment

log = logging.getLogger(__name__)

# The connection to ask, found when the bytes are wanted: the one that saw the message,
# or after a restart whichever now serves that account (raises OneBotUnavailable).
ConnectionFor = Callable[[], OneBotConnection]

FILES_MAX_BYTES = 20 * 1024 * 1024  # documents and voice; the readers apply their own caps
# A get_file/get_record answer carries the file as base64 (4/3 of its size) in one frame:
# the file cap must stay below what one answer frame may hold, or a file within the cap
# could never arrive.
_ANSWER_SLACK = 64 * 1024  # the rest of the answer: file name, path, url, echo
assert FILES_MAX_BYTES * 4 // 3 + _ANSWER_SLACK <= MAX_ANSWER_BYTES
VOICE_FORMAT = "mp3"  # what get_record is asked to hand back (transcription takes it as is)


class QQFiles:
    """Makes Attachments for `file` and `record` segments of one channel."""

    def __init__(
        self,
        downloader: SafeDownloader,
        *,
        action_timeout_s: float,
        max_bytes: int = FILES_MAX_BYTES,
    ) -> None:
        self._downloader = downloader.with_cap(max(max_bytes, downloader.policy.max_bytes))
        self._timeout_s = max(action_timeout_s, 30.0)
        self._max_bytes = max_bytes

    def attachment(self, connection: ConnectionFor, seg: FileSegment) -> Attachment:
        """An Attachment that asks `connection()` for its bytes when they are read; its
        locator keeps what get_record/get_file need, so recovery can ask again."""

        async def fetch() -> bytes:
            return await self._fetch(connection(), seg)

        locator = {"file": seg.file, "file_id": seg.file_id, "url": seg.url}
        return Attachment(
            kind=seg.kind,
            fetch=fetch,
            name=seg.name,
            size=seg.size,
            locator=json.dumps({k: v for k, v in locator.items() if v}, sort_keys=True),
        )

    def restore(self, stub: Attachment, connection: ConnectionFor) -> Attachment | None:
        """The attachment of an accepted message, rebuilt from its locator after a restart
        (or a bare URL, which older stored rows hold). None: nothing to ask for."""
        if not stub.locator:
            return None
        if _is_http(stub.locator):
            seg = FileSegment(stub.kind, file="", url=stub.locator)
        else:
            try:
                found = json.loads(stub.locator)
            except ValueError:
                return None
            if not isinstance(found, dict):
                return None
            seg = FileSegment(
                stub.kind,
                file=str(found.get("file") or ""),
                file_id=str(found.get("file_id") or ""),
                url=str(found.get("url") or ""),
            )
        seg = FileSegment(seg.kind, seg.file, stub.name, seg.file_id, seg.url, stub.size)
        return self.attachment(connection, seg)

    async def _fetch(self, conn: OneBotConnection, seg: FileSegment) -> bytes:
        if seg.kind == "voice":
            got = await self._ask(conn, "get_record", seg, out_format=VOICE_FORMAT)
            if got is not None:
                return got
        elif _is_http(seg.url):
            return await self._download(seg.url)
        else:
            got = await self._ask(conn, "get_file", seg)
            if got is not None:
                return got
        if _is_http(seg.url):
            return await self._download(seg.url)
        raise DownloadError(f"the QQ {seg.kind} could not be fetched")

    async def _ask(
        self, conn: OneBotConnection, action: str, seg: FileSegment, **extra: str
    ) -> bytes | None:
        params: dict[str, Any] = {"file": seg.file or seg.file_id, **extra}
        if seg.file_id:
            params["file_id"] = seg.file_id
        try:
            data = await conn.actions.call(action, params, timeout_s=self._timeout_s)
        except AnswerTooLarge as exc:  # the file in it is over the cap: say so, no fallback
            raise DownloadTooLarge(f"the {seg.kind} is too large: {exc}") from None
        except OneBotError as exc:
            log.info("onebot%s: %s failed: %s", conn.label, action, exc)
            return None
        if not isinstance(data, dict):
            return None
        encoded = data.get("base64")
        if isinstance(encoded, str) and encoded:
            if len(encoded) * 3 // 4 > self._max_bytes:
                raise DownloadTooLarge(f"the {seg.kind} is over the {self._max_bytes} byte cap")
            try:
                return base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise DownloadError(f"{action} returned broken base64") from None
        url = data.get("url")
        if isinstance(url, str) and _is_http(url):
            return await self._download(url)
        return None

    async def _download(self, url: str) -> bytes:
        return (await self._downloader.fetch(url)).data


def _is_http(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))
