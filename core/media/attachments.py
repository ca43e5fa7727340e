"""Everything a message shares besides pictures: links, documents, voice -> notes.

The processor asks once per addressed message and gets two versions of the notes: the
full one for this turn (`(Document 1: report.pdf, 12 pages — <text>)`) and a short one
stored with the turn, so later turns keep "the user sent report.pdf" and not its whole
text. Each part fails on its own: an unreadable file or a deaf speech service becomes a
note naming it, the turn is still answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from core.media.documents import DocumentText
from core.media.links import LinkReader
from core.media.sandbox import ParseFailed, ParseSandbox
from core.media.shared import NOTICE, Defuse, neutralise, one_line
from core.media.voice import SpeechService, VoiceError, VoiceTooLong
from core.messages import Attachment, InboundMessage
from core.usage.meter import UsageSubject

log = logging.getLogger(__name__)
# The chat document child's own limits, below the sandbox's (the knowledge base reads whole
# PDFs of up to 2,000 pages with those): room for pypdf on a 10 MB PDF read a few pages at
# a time, or the DOCX stream reader, with Python and lxml, on a busy machine.
DOCUMENT_CPU_S = 8
DOCUMENT_MEMORY_MB = 384
# Called with each document fetched for a message and its bytes (the sandbox's in/).
KeepDocument = Callable[[InboundMessage, Attachment, bytes], Awaitable[None]]


@dataclass(frozen=True)
class SharedNotes:
    notes: list[str] = field(default_factory=list)  # for this turn
    short: list[str] = field(default_factory=list)  # stored with the turn
    meta: dict[str, Any] = field(default_factory=dict)
    spoken: bool = False  # the message was (also) a voice note


@dataclass(frozen=True)
class DocumentLimits:
    enabled: bool = True
    max_bytes: int = 10 * 1024 * 1024
    max_pages: int = 50
    max_chars: int = 12_000
    timeout_s: float = 60.0


class SharedReader:
    """Reads a message's links, documents and voice notes (each part optional)."""

    def __init__(
        self,
        *,
        links: LinkReader | None = None,
        documents: DocumentLimits | None = None,
        speech: SpeechService | None = None,
        defuse: Defuse | None = None,
        count: Callable[[str], int] | None = None,
        max_tokens: int | None = None,
        sandbox: ParseSandbox | None = None,
    ) -> None:
        """`count`/`max_tokens`: all notes of one message together stay within this many
        tokens (a share of the context window), the last ones cut first. `sandbox`: where
        documents are parsed (the daemon shares one with the page reader)."""
        self._sandbox = sandbox or ParseSandbox()
        self._count = count
        self._max_tokens = max_tokens
        self._links = links
        self._documents = documents or DocumentLimits(enabled=False)
        self._speech = speech
        self._defuse = defuse
        self._keep: KeepDocument | None = None

    def keep_documents(self, keep: KeepDocument) -> None:
        """Hand each document fetched for a chat to `keep` too (the sandbox's in/)."""
        self._keep = keep

    async def __call__(self, message: InboundMessage) -> SharedNotes:
        who = UsageSubject.of(message)
        docs = [a for a in message.attachments if a.kind == "document"]
        voices = [a for a in message.attachments if a.kind in ("voice", "audio")]
        voice_task = asyncio.gather(*(self._voice(v, who) for v in voices))
        doc_task = asyncio.gather(*(self._document(d, message) for d in docs))
        voice_notes, doc_notes = await asyncio.gather(voice_task, doc_task)
        notes: list[str] = []
        short: list[str] = []
        for note in voice_notes:
            notes.append(note)
            short.append(note)  # what was said is the message itself: kept
        for number, (full, brief) in enumerate(doc_notes, start=1):
            notes.append(f"(Document {number}: {full})")
            short.append(f"(Document {number}: {brief})")
        if self._links is not None:
            texts = [message.text, message.reply_text or ""]
            found = await self._links.notes(texts)
            notes += found.notes
            short += found.short
        notes = self._fit(notes)
        if notes:
            notes.insert(0, NOTICE)
        meta = {"documents": [d.name for d in docs]} if docs else {}
        return SharedNotes(notes, short, meta, spoken=bool(voices))

    def _fit(self, notes: list[str]) -> list[str]:
        """Keep the notes within the token budget: a note that does not fit is cut to
        the room left (with a note saying so); past the budget, only headers remain."""
        if self._count is None or self._max_tokens is None:
            return notes
        fitted: list[str] = []
        used = 0
        for note in notes:
            tokens = self._count(note)
            room = self._max_tokens - used
            if tokens > room:
                # A note saying the document was read only in part must survive the cut:
                # the model would otherwise answer as if it had read the whole of it.
                body, found, part = note.rpartition(" …(read only in part: ")
                if not found:
                    body = note
                said = f"; read only in part: {part.rstrip(')')}" if found else ""
                keep = max(0, int(len(body) * room / max(tokens, 1)) - 60 - len(said))
                note = (
                    body[: max(keep, 80)].rstrip(")") + f" …(cut to fit the context window{said}))"
                )
                tokens = self._count(note)
            fitted.append(note)
            used += tokens
        return fitted

    async def hear(self, message: InboundMessage) -> str | None:
        """The first voice note's transcript, or None (the dispatcher's wake-word check)."""
        voices = [a for a in message.attachments if a.kind == "voice"]
        if not voices:
            return None
        return await self.transcript(voices[0], UsageSubject.of(message))

    async def transcript(self, attachment: Attachment, who: UsageSubject) -> str | None:
        """A voice note's text, or None when it cannot be heard (for the wake-word check)."""
        if self._speech is None:
            return None
        try:
            data = await attachment.fetch()
            return await self._speech.transcribe(data, who=who, duration_s=attachment.duration_s)
        except Exception as exc:  # a channel fetch or the service: never fail the caller
            log.info("voice not transcribed: %s", type(exc).__name__)
            return None

    async def _voice(self, attachment: Attachment, who: UsageSubject) -> str:
        if self._speech is None:
            return "(Voice: not transcribed — speech recognition is off)"
        options = self._speech.options
        if attachment.size is not None and attachment.size > options.max_bytes:
            return "(Voice: too large to transcribe)"
        too_long = f"(Voice: longer than {options.max_seconds:g} seconds, not transcribed)"
        if attachment.duration_s is not None and attachment.duration_s > options.max_seconds:
            return too_long
        try:
            data = await attachment.fetch()
            text = await self._speech.transcribe(data, who=who, duration_s=attachment.duration_s)
        except VoiceTooLong:  # measured from the audio: the platform's figure may lie
            return too_long
        except VoiceError as exc:
            return f"(Voice: could not be transcribed: {one_line(str(exc), 120)})"
        except Exception as exc:  # the channel's download failed
            log.info("voice could not be fetched: %s", type(exc).__name__)
            return "(Voice: could not be fetched)"
        if not text:
            return "(Voice: no speech heard)"
        return f"(Voice: {neutralise(text, self._defuse)})"

    async def _document(self, attachment: Attachment, message: InboundMessage) -> tuple[str, str]:
        name = one_line(attachment.name or "file", 120)
        limits = self._documents
        if not limits.enabled:
            note = f"{name} — not read (documents are off)"
            return note, note
        if attachment.size is not None and attachment.size > limits.max_bytes:
            note = f"{name} — not read: larger than {_mb(limits.max_bytes)}"
            return note, note
        try:
            data = await attachment.fetch()
        except Exception as exc:  # the channel's download: too large, gone, timed out
            log.info("document %s not fetched: %s", name, type(exc).__name__)
            note = f"{name} — could not be downloaded"
            if "TooLarge" in type(exc).__name__:
                note = f"{name} — not read: larger than {_mb(limits.max_bytes)}"
            return note, note
        if len(data) > limits.max_bytes:
            note = f"{name} — not read: larger than {_mb(limits.max_bytes)}"
            return note, note
        if self._keep is not None:
            await self._keep(message, attachment, data)
        try:
            doc = await self._parse(data, attachment, limits)
        except ParseFailed as exc:
            note = f"{name} — could not be read: {one_line(str(exc), 160)}"
            return note, note
        head = name
        if doc.pages is not None:
            head += f", {doc.pages} page{'s' if doc.pages != 1 else ''}"
        text = neutralise(doc.text, self._defuse)
        if doc.cut:
            text += " " + partly_note(doc, limits.max_chars)
        return f"{head} — {text}", f"{head} — sent and read on that turn; its text is not kept"

    async def _parse(
        self, data: bytes, attachment: Attachment, limits: DocumentLimits
    ) -> DocumentText:
        """extract_document in the sandbox: a hostile file costs a child process, bounded
        in CPU, memory and time, never the daemon."""
        args = {
            "name": attachment.name or "",
            "mime": attachment.mime,
            "max_pages": limits.max_pages,
            "max_chars": limits.max_chars,
        }
        reply = 8 * limits.max_chars + 64 * 1024  # UTF-8 and JSON escapes around the text
        result = await self._sandbox.run(
            "document",
            args,
            data,
            max_reply=reply,
            timeout_s=limits.timeout_s,
            cpu_s=DOCUMENT_CPU_S,
            memory_mb=DOCUMENT_MEMORY_MB,
        )
        try:
            doc = DocumentText(**result)
        except TypeError:
            raise ParseFailed("the reader failed on it") from None
        if not isinstance(doc.text, str) or len(doc.text) > limits.max_chars:
            raise ParseFailed("the reader failed on it")
        return doc


def partly_note(doc: DocumentText, max_chars: int) -> str:
    """What the model is told about a document read only in part: which pages, how many
    characters, and that the rest was not read (so it does not answer as if it had)."""
    if doc.pages and doc.pages_read:
        span = f"page 1 of {doc.pages}" if doc.pages_read == 1 else f"pages 1-{doc.pages_read}"
        if doc.pages_read > 1:
            span += f" of {doc.pages}"
        return (
            f"…(read only in part: {span}, at most {max_chars} characters; the rest was not read)"
        )
    return f"…(read only in part: its first {max_chars} characters; the rest was not read)"


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"
