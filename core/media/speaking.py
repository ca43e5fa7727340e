"""Spoken replies (`[voice] reply`): which replies are spoken, and never at the text's cost.

`when_spoken` answers a voice note with voice (typed messages get text only), `always`
speaks every reply. The speech is made before the reply is handed to the one door out
(core/turn/delivery.py) as the OutboundMessage's `audio`; a speech call that fails, or a reply
too long to speak, leaves `audio` empty and the text goes out as always.
"""

from __future__ import annotations

import logging
from typing import Literal

from core.media.voice import SpeechService, VoiceError
from core.messages import InboundMessage
from core.usage.meter import UsageSubject

log = logging.getLogger(__name__)

ReplyMode = Literal["off", "when_spoken", "always"]


class VoiceReplies:
    def __init__(self, speech: SpeechService, mode: ReplyMode) -> None:
        self._speech = speech
        self._mode = mode

    async def __call__(self, message: InboundMessage, spoken: bool, text: str) -> bytes | None:
        """The reply as OGG/Opus, or None (not wanted, or it could not be made)."""
        if self._mode == "off" or (self._mode == "when_spoken" and not spoken):
            return None
        if not text.strip() or len(text) > self._speech.options.tts_max_chars:
            return None
        try:
            return await self._speech.speak(text, who=UsageSubject.of(message))
        except VoiceError as exc:
            log.warning("reply in %s not spoken: %s", message.chat_key, exc)
        except Exception as exc:  # a transcoding failure must not cost the text reply
            log.warning("reply in %s not spoken: %s", message.chat_key, type(exc).__name__)
        return None
