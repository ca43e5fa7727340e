"""Lazy, bounded downloads of Telegram photos through getFile.

Why lazy: most group photos are never looked at (the bot was not called), so bytes are
fetched only when the vision path asks. Why bounded: a user picks what to upload, so
the declared size, the size getFile reports, the bytes received and the time taken are
all capped; a refusal raises the same DownloadError family the other channels use.
The file is streamed and reading stops at the cap whatever the sizes said, because
getFile may under-report a size or omit it.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp
from telegram import Bot
from telegram.error import TelegramError

from core.media.fetch import DownloadError, DownloadTooLarge
from core.messages import Attachment, ImageFetcher, ImageRef

# The Bot API's getFile refuses larger files; documents and voice are capped here too.
GETFILE_MAX_BYTES = 20 * 1024 * 1024

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024


class TelegramFiles:
    """Makes ImageRefs whose fetch goes through the bot's getFile, with limits."""

    def __init__(self, bot: Bot, *, max_bytes: int, timeout_s: float) -> None:
        if max_bytes < 1 or timeout_s <= 0:
            raise ValueError("max_bytes must be >= 1 and timeout_s > 0")
        self._bot = bot
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s

    def image_ref(self, file_id: str, declared_size: int | None, mime: str, name: str) -> ImageRef:
        return ImageRef(
            fetch=self._fetcher(file_id, declared_size), mime=mime, name=name, locator=file_id
        )

    def attachment_ref(
        self,
        kind: str,
        file_id: str,
        declared_size: int | None,
        mime: str | None,
        name: str,
        duration_s: float | None,
    ) -> Attachment:
        """A document or voice note; its own cap is applied by the reader before fetching,
        this one (getFile's 20 MB) while fetching."""
        return Attachment(
            kind=kind,
            fetch=self._fetcher(file_id, declared_size, GETFILE_MAX_BYTES),
            name=name,
            mime=mime,
            size=declared_size,
            duration_s=duration_s,
            locator=file_id,
        )

    def _fetcher(
        self, file_id: str, declared_size: int | None, cap: int | None = None
    ) -> ImageFetcher:
        limit = cap or self._max_bytes

        async def fetch() -> bytes:
            self._check_size(declared_size, "declared", limit)
            try:
                async with asyncio.timeout(self._timeout_s):
                    tg_file = await self._bot.get_file(file_id)
                    self._check_size(tg_file.file_size, "reported", limit)
                    if not tg_file.file_path:
                        raise DownloadError("telegram gave no file path")
                    return await self._read_capped(tg_file.file_path, limit)
            except TimeoutError:
                raise DownloadError(
                    f"telegram file took longer than {self._timeout_s:g}s"
                ) from None
            except TelegramError as exc:
                raise DownloadError(f"telegram file could not be fetched: {exc}") from None

        return fetch

    async def _read_capped(self, url: str, limit: int) -> bytes:
        """GET the file, reading at most `limit` + one chunk. The URL holds the bot
        token: no error says it. Compressed transfer is refused (identity only), so the
        bytes counted are the bytes kept."""
        headers = {"Accept-Encoding": "identity"}
        try:
            async with (
                # trust_env: the proxy settings the Bot API calls use (httpx honours them)
                aiohttp.ClientSession(auto_decompress=False, trust_env=True) as session,
                session.get(url, headers=headers, allow_redirects=False) as response,
            ):
                if response.status != 200:
                    raise DownloadError(f"telegram file download: HTTP {response.status}")
                self._check_size(response.content_length, "sent as", limit)
                data = bytearray()
                async for chunk in response.content.iter_chunked(_CHUNK):
                    data += chunk
                    self._check_size(len(data), "received, at least", limit)
                return bytes(data)
        except aiohttp.ClientError as exc:
            raise DownloadError(f"telegram file download failed: {type(exc).__name__}") from None

    def _check_size(self, size: int | None, what: str, cap: int) -> None:
        if size is not None and size > cap:
            raise DownloadTooLarge(f"file is {size} bytes ({what}), over the {cap} cap")
