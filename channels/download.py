"""Moved: every download goes through core/media/fetch.py (links, documents, images)."""

from core.media.fetch import (
    Downloaded,
    DownloadError,
    DownloadPolicy,
    DownloadRefused,
    DownloadTooLarge,
    SafeDownloader,
    is_public_address,
)

__all__ = [
    "DownloadError",
    "DownloadPolicy",
    "DownloadRefused",
    "DownloadTooLarge",
    "Downloaded",
    "SafeDownloader",
    "is_public_address",
]
