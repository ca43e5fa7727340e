"""The image provider: one OpenAI-compatible `/v1/images/generations` call per picture.

Why its own module: the job (core/images/job.py) must know only "a picture, or one line
saying why not". A refusal by the provider (content policy: an HTTP 400 with its message)
and a drawing that takes longer than `timeout_s` are such lines, never retried: asking
again would likely be refused again, or pay for a second picture. Anything else (the
provider down, a 5xx) raises, and the job runner tries again up to its attempts.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import openai

from core.media.fetch import DownloadError

log = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 20 * 1024 * 1024


class DrawRefused(Exception):
    """No picture, for a reason the chat is told as is (str() is one plain line)."""


class Fetcher(Protocol):
    """The safe fetcher's call (core.media.fetch.SafeDownloader.fetch)."""

    async def fetch(
        self, url: str, *, accept: tuple[str, ...] = (), max_bytes: int | None = None
    ) -> Any: ...


@dataclass(frozen=True)
class Drawn:
    image: bytes
    model: str
    prompt_tokens: int = 0  # what the provider reported the picture cost (0: nothing)
    completion_tokens: int = 0


@dataclass(frozen=True)
class ArtistSettings:
    base_url: str
    api_key: str | None
    model: str
    size: str
    quality: str | None
    timeout_s: float


class Artist:
    """Draws one picture per call; `close()` ends its HTTP client."""

    def __init__(self, settings: ArtistSettings, fetcher: Fetcher | None = None) -> None:
        self._settings = settings
        self._fetcher = fetcher  # for a provider that answers with a URL
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "none",
            timeout=settings.timeout_s,
            max_retries=0,  # a retry may pay for a second picture: the job decides
        )

    @property
    def model(self) -> str:
        return self._settings.model

    async def close(self) -> None:
        await self._client.close()

    async def draw(self, prompt: str) -> Drawn:
        """The picture for `prompt`; DrawRefused (a refusal, a timeout) or another error."""
        timeout_s = self._settings.timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                return await self._draw(prompt)
        except (TimeoutError, openai.APITimeoutError):
            raise DrawRefused(
                f"The picture was not finished within {timeout_s:g} s; nothing was drawn."
            ) from None
        except openai.BadRequestError as exc:
            raise DrawRefused(f"The image provider refused to draw this: {_message(exc)}") from None

    async def _draw(self, prompt: str) -> Drawn:
        extra: dict[str, Any] = {}
        if self._settings.quality:
            extra["quality"] = self._settings.quality
        response = await self._client.images.generate(
            model=self._settings.model,
            prompt=prompt,
            n=1,
            size=self._settings.size,  # type: ignore[arg-type]  # providers have their own sizes
            response_format="b64_json",
            **extra,
        )
        if not response.data:
            raise RuntimeError("the image provider answered with no picture")
        item = response.data[0]
        if item.b64_json:
            try:
                image = base64.b64decode(item.b64_json, validate=True)
            except (binascii.Error, ValueError):
                raise RuntimeError("the image provider's picture is not base64") from None
        elif item.url:
            image = await self._fetch(item.url)
        else:
            raise RuntimeError("the image provider answered with neither b64_json nor a url")
        usage = getattr(response, "usage", None)
        return Drawn(
            image=image,
            model=self._settings.model,
            prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        )

    async def _fetch(self, url: str) -> bytes:
        if self._fetcher is None:
            raise RuntimeError("the image provider answered with a url and nothing fetches it")
        try:
            fetched = await self._fetcher.fetch(url, accept=("image/",), max_bytes=MAX_IMAGE_BYTES)
        except DownloadError as exc:
            raise RuntimeError(f"the drawn picture could not be fetched: {exc}") from None
        return bytes(fetched.data)


def _message(exc: openai.APIStatusError) -> str:
    """The provider's own words (its error.message), one line, short."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
    text = " ".join(str(message or exc.message).split())
    return text[:200] or "no reason given"
