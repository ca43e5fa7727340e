"""Builds the readers for what people share (`[links]`, `[documents]`, `[voice]`).

The safe fetcher for links, the page reader (also behind the `[Read: url]` tool),
document limits and the speech service, each from its config section.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

from aiohttp.abc import AbstractResolver

from bot.config import Settings
from core.llm import OPENAI_BASE_URL
from core.media.attachments import DocumentLimits, SharedReader
from core.media.fetch import DownloadPolicy, SafeDownloader
from core.media.links import LinkReader, PageReader
from core.media.sandbox import ParseSandbox
from core.media.speaking import VoiceReplies
from core.media.voice import SpeechService
from core.text.tokens import TokenCounter
from core.tools.read import read_tool
from core.tools.registry import ToolRegistry
from core.usage.meter import UsageMeter

SHARE_OF_WINDOW = 3  # what one message's links, documents and voice may fill, at most


def link_policy(settings: Settings) -> DownloadPolicy:
    """The `[links]` download bounds every fetch of a shared page or file goes through."""
    links = settings.links
    return DownloadPolicy(
        max_bytes=links.max_bytes,
        timeout_s=links.timeout_s,
        max_redirects=links.max_redirects,
        allow_private_hosts=tuple(links.allow_hosts),
        user_agent="Mozilla/5.0 (compatible; chatterd)",
    )


class SharedMedia:
    """The daemon's link, document and voice readers, built once from the settings."""

    def __init__(
        self,
        settings: Settings,
        stack: AsyncExitStack,
        meter: UsageMeter,
        resolver: AbstractResolver | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self._settings = settings
        links = settings.links
        policy = link_policy(settings)
        # Pages and documents (and /kb add's files) are parsed in limited children.
        self.sandbox = sandbox = ParseSandbox()
        stack.push_async_callback(sandbox.close)
        self.pages = PageReader(SafeDownloader(policy, resolver=resolver), sandbox=sandbox)
        self.speech = self._speech(settings, meter)
        if self.speech is not None:
            stack.push_async_callback(self.speech.close)
        self._registry: ToolRegistry | None = None
        self.voice_replies = (
            VoiceReplies(self.speech, settings.voice.reply)
            if self.speech is not None and settings.voice.reply != "off"
            else None
        )
        self.reader = SharedReader(
            links=LinkReader(
                self.pages,
                max_links=links.max_links,
                max_chars=links.max_chars,
                defuse=self._defuse,
            )
            if links.enabled and links.max_links > 0
            else None,
            documents=DocumentLimits(
                enabled=settings.documents.enabled,
                max_bytes=settings.documents.max_bytes,
                max_pages=settings.documents.max_pages,
                max_chars=settings.documents.max_chars,
            ),
            speech=self.speech,
            defuse=self._defuse,
            count=counter.count if counter is not None else None,
            max_tokens=max(300, settings.llm.context_window // SHARE_OF_WINDOW),
            sandbox=sandbox,
        )

    def add_tools(self, registry: ToolRegistry) -> None:
        """`[Read: url]` joins the tools; its markers are defused in shared text too."""
        self._registry = registry
        links = self._settings.links
        registry.register(
            read_tool(
                self.pages, max_chars=links.max_chars, enabled=links.enabled and links.read_tool
            )
        )

    def _defuse(self, text: str) -> str:
        return self._registry.defuse_markers(text) if self._registry is not None else text

    @staticmethod
    def _speech(settings: Settings, meter: UsageMeter) -> SpeechService | None:
        voice, llm = settings.voice, settings.llm
        if not voice.enabled:
            return None
        key = voice.api_key or llm.api_key
        return SpeechService(
            base_url=voice.base_url or llm.base_url or OPENAI_BASE_URL,
            api_key=key.get_secret_value() if key else None,
            options=voice,
            meter=meter,
        )
