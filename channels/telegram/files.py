"""Lazy, bounded downloads of Telegram photos through getFile.

Why lazy: most group photos are never looked at (the bot was not called), so bytes are
fetched only when the vision path asks. Why bounded: a user picks what to upload, so
the declared size, the size getFile reports, the bytes received and the time taken are
all capped; a refusal raises the same DownloadError family the other channels use.
"""

from __future__ import annotations

import asyncio
import logging

from telegram import Bot
from telegram.error import TelegramError

from core.media.fetch import DownloadError, DownloadTooLarge
from core.messages import Attachment, ImageFetcher, ImageRef

# The Bot API's getFile refuses larger files; documents and voice are capped here too.
GETFILE_MAX_BYTES = 20 * 1024 * 1024

log = logging.getLogger(__name__)


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
                    data = await tg_file.download_as_bytearray()
            except TimeoutError:
                raise DownloadError(
                    f"telegram file took longer than {self._timeout_s:g}s"
                ) from None
            except TelegramError as exc:
                raise DownloadError(f"telegram file could not be fetched: {exc}") from None
            self._check_size(len(data), "received", limit)
            return bytes(data)

        return fetch

    def _check_size(self, size: int | None, what: str, cap: int) -> None:
        if size is not None and size > cap:
            raise DownloadTooLarge(f"file is {size} bytes ({what}), over the {cap} cap")
