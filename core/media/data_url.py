"""Image files and bytes -> OpenAI `image_url` content parts with base64 data URLs.

Why check content, not the file name: a `.png` may be anything, and a model endpoint
fed a non-image fails the whole turn. Why cache by content hash: the same picture is
often sent again (a sticker, a re-forwarded photo) and base64 of a large image is costly;
the cache is per instance and bounded in entries and bytes, so it can never grow without
limit and never outlives the builder that owns it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cachetools import LRUCache

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
MediaSource = str | os.PathLike[str] | bytes


def data_url(data: bytes, mime: str) -> str:
    """A base64 `data:` URL, the form OpenAI-compatible APIs take for inline images."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def sniff_image_mime(data: bytes) -> str | None:
    """The MIME type of a JPEG, PNG, GIF or WebP by its magic bytes; None for anything else."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class ImageEncoder:
    """Encodes images once and reuses the data URL for identical content.

    `max_bytes` caps one image; `cache_entries` and `cache_bytes` bound the cache (least
    recently used entries go first). `hits`/`misses` let tests and benchmarks see reuse.
    """

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        cache_entries: int = 32,
        cache_bytes: int = 64 * 1024 * 1024,
        detail: str | None = None,
    ) -> None:
        if max_bytes < 1 or cache_entries < 0 or cache_bytes < 0:
            raise ValueError("max_bytes must be >= 1 and the cache bounds >= 0")
        self.max_bytes = max_bytes
        self.cache_entries = cache_entries
        self.cache_bytes = cache_bytes
        self.detail = detail
        # Sized by the URLs' length, so `cache_bytes` bounds it; `cache_entries` is checked
        # on insert. Least recently used go first.
        self._urls: LRUCache[str, str] = LRUCache(cache_bytes, getsizeof=len)
        self.hits = 0
        self.misses = 0

    @property
    def cached_bytes(self) -> int:
        return int(self._urls.currsize)

    def __len__(self) -> int:
        return len(self._urls)

    def image_part(self, source: MediaSource) -> dict[str, Any] | None:
        """One `{"type": "image_url", ...}` part, or None (logged) when unusable."""
        label, data = self._read(source)
        if data is None:
            return None
        mime = sniff_image_mime(data[:16])
        if mime is None:
            log.warning("media %s skipped: not a JPEG, PNG, GIF or WebP image", label)
            return None
        url = self._data_url(data, mime)
        image: dict[str, Any] = {"url": url}
        if self.detail:
            image["detail"] = self.detail
        return {"type": "image_url", "image_url": image}

    def image_parts(self, sources: Iterable[MediaSource] | None) -> list[dict[str, Any]]:
        """Parts for every usable source, in order; the unusable ones are skipped."""
        parts = []
        for source in sources or ():
            part = self.image_part(source)
            if part is not None:
                parts.append(part)
        return parts

    def _read(self, source: MediaSource) -> tuple[str, bytes | None]:
        if isinstance(source, bytes | bytearray):
            label = f"<{len(source)} bytes>"
            if len(source) > self.max_bytes:
                log.warning("media %s skipped: larger than %d bytes", label, self.max_bytes)
                return label, None
            return label, bytes(source)
        path = Path(source)
        label = path.name or str(path)
        try:
            size = path.stat().st_size
            if not path.is_file():
                log.warning("media %s skipped: not a regular file", label)
                return label, None
            if size > self.max_bytes:
                log.warning(
                    "media %s skipped: %d bytes, over the %d cap", label, size, self.max_bytes
                )
                return label, None
            with path.open("rb") as handle:
                data = handle.read(self.max_bytes + 1)
        except FileNotFoundError:
            log.warning("media %s skipped: file not found", label)
            return label, None
        except OSError as exc:
            log.warning("media %s skipped: %s", label, exc.strerror or exc)
            return label, None
        if len(data) > self.max_bytes:  # grew after stat
            log.warning("media %s skipped: over the %d byte cap", label, self.max_bytes)
            return label, None
        return label, data

    def _data_url(self, data: bytes, mime: str) -> str:
        key = f"{mime}:{hashlib.sha256(data).hexdigest()}"
        url = self._urls.get(key)
        if url is not None:
            self.hits += 1
            return url
        self.misses += 1
        url = data_url(data, mime)
        if self.cache_entries and len(url) <= self.cache_bytes:
            self._urls[key] = url  # evicts the least recently used past `cache_bytes`
            while len(self._urls) > self.cache_entries:
                self._urls.popitem()  # the least recently used
        return url
