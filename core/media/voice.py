"""Speech to text (`/v1/audio/transcriptions`) and text to speech (`/v1/audio/speech`).

Why cache transcripts by content hash: the same voice note is forwarded around a group
and re-read after a restart; transcribing it again costs money and time. Why never
fail a turn: a voice note that cannot be heard becomes a note saying so, and the
conversation goes on; a reply that cannot be spoken is still sent as text.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Protocol

import openai
from cachetools import LRUCache

from core.llm.provider import ChatResult
from core.media.audio import BadAudio, measured_seconds, ready_for_api
from core.usage.meter import ModelCall, UsageMeter, UsageSubject

log = logging.getLogger(__name__)

MAX_TRANSCRIPT_CHARS = 8000


class VoiceError(Exception):
    """Speech could not be turned into text or back; str(exc) is a short reason."""


class VoiceTooLong(VoiceError):
    """Longer than `max_seconds`, as declared or as measured from the audio."""


class VoiceOptions(Protocol):
    """The models and limits the service reads; `[voice]` (VoiceConfig) is passed whole."""

    @property
    def model(self) -> str: ...
    @property
    def max_seconds(self) -> float: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def tts_model(self) -> str: ...
    @property
    def tts_voice(self) -> str: ...
    @property
    def tts_max_chars(self) -> int: ...


class SpeechService:
    """One OpenAI-compatible endpoint for both directions; usage is metered per sender."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        options: VoiceOptions,
        meter: UsageMeter | None = None,
        cache_entries: int = 512,
    ) -> None:
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "none", max_retries=1, timeout=options.timeout_s
        )
        self.options = options
        self._meter = meter
        self._cache: LRUCache[str, str] = LRUCache(cache_entries)
        self.transcribe_calls = 0
        self.speech_calls = 0

    async def close(self) -> None:
        await self._client.close()

    async def transcribe(
        self, data: bytes, *, who: UsageSubject | None, duration_s: float | None = None
    ) -> str:
        """The transcript of one voice note (cached by the hash of its bytes)."""
        if len(data) > self.options.max_bytes:
            raise VoiceError(f"it is larger than {self.options.max_bytes} bytes")
        if duration_s is not None and duration_s > self.options.max_seconds:
            raise VoiceTooLong(f"it is longer than {self.options.max_seconds:g} seconds")
        digest = hashlib.sha256(data).hexdigest()
        cached = self._cache.get(digest)
        if cached is not None:
            return cached
        try:
            audio, name, mime, seconds = await asyncio.to_thread(self._measured, data)
        except BadAudio as exc:
            raise VoiceError(str(exc)) from None
        if seconds > self.options.max_seconds:  # whatever the platform said it was
            log.info("voice refused: over %g seconds when measured", self.options.max_seconds)
            raise VoiceTooLong(f"it is longer than {self.options.max_seconds:g} seconds")
        self.transcribe_calls += 1
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.options.model, file=(name, audio, mime)
            )
        except openai.APIError as exc:
            log.warning("transcription failed: %s", type(exc).__name__)
            raise VoiceError("the speech service did not answer") from None
        text = " ".join(str(getattr(result, "text", "") or "").split())[:MAX_TRANSCRIPT_CHARS]
        await self._record(who, self.options.model, "", text, "transcription")
        self._cache[digest] = text
        return text

    def _measured(self, data: bytes) -> tuple[bytes, str, str, float]:
        """What the endpoint gets (bytes, name, mime) and its length as measured from
        those very bytes, never as declared. CPU-bound: run in a worker thread."""
        audio, name, mime = ready_for_api(data)
        return audio, name, mime, measured_seconds(audio, self.options.max_seconds)

    async def speak(self, text: str, *, who: UsageSubject | None) -> bytes:
        """Speech for `text` as OGG/Opus (what a Telegram voice bubble needs)."""
        text = text.strip()
        if not text or len(text) > self.options.tts_max_chars:
            raise VoiceError("the text is empty or too long to speak")
        self.speech_calls += 1
        try:
            response = await self._client.audio.speech.create(
                model=self.options.tts_model,
                voice=self.options.tts_voice,
                input=text,
                response_format="opus",
            )
            audio = response.content
        except openai.APIError as exc:
            log.warning("speech failed: %s", type(exc).__name__)
            raise VoiceError("the speech service did not answer") from None
        await self._record(who, self.options.tts_model, text, "", "speech")
        if not audio.startswith(b"OggS"):
            from core.media.transcode import to_ogg_opus  # lazy: PyAV, only when needed

            audio = await asyncio.to_thread(to_ogg_opus, audio)
        return audio

    async def _record(
        self, who: UsageSubject | None, model: str, prompt: str, answer: str, purpose: str
    ) -> None:
        if self._meter is None or who is None:
            return
        result = ChatResult(
            text=answer, model=model, finish_reason=None, prompt_tokens=None, completion_tokens=None
        )
        messages = [{"role": "user", "content": prompt}] if prompt else []
        await self._meter.record(who, [ModelCall(result, messages)], purpose)  # type: ignore[arg-type]
