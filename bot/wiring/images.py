"""Pictures in the daemon (`[images]`): the provider, the desk, the job kind, the tool
and `/draw`, built from the settings when `[images] enabled`.

The key fallbacks (`[images]` base_url and api_key default to `[llm]`'s, as `[vision]`'s
do) and the safe fetcher for providers that answer with a URL are decided here.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from aiohttp.abc import AbstractResolver

from bot.commands.draw import DrawCommand
from bot.commands.table import Commands
from bot.config import Settings
from core.admins import Admins
from core.clock import WallClock
from core.images.artist import MAX_IMAGE_BYTES, Artist, ArtistSettings
from core.images.desk import KIND, DrawDesk, DrawRules
from core.images.job import ImageMeter, draw_handler
from core.images.tool import draw_tool
from core.jobs.runner import JobRunner
from core.llm.endpoint import OPENAI_BASE_URL
from core.media.fetch import DownloadPolicy, SafeDownloader
from core.tools.registry import ToolRegistry
from memory.jobs.store import JobStore


@dataclass(frozen=True)
class Drawing:
    """The built parts; `attach` puts them in the runner, the tools and the commands."""

    desk: DrawDesk
    artist: Artist

    def add_tool(self, registry: ToolRegistry) -> None:
        registry.register(draw_tool(self.desk))

    def attach(self, runner: JobRunner, commands: Commands, meter: ImageMeter) -> None:
        runner.register(KIND, draw_handler(self.artist, meter))
        commands.add("draw", DrawCommand(self.desk))


def build_drawing(
    settings: Settings,
    jobs: JobStore,
    stack: AsyncExitStack,
    clock: WallClock,
    admins: Admins,
    resolver: AbstractResolver | None = None,
) -> Drawing | None:
    """The pictures' parts, or None when `[images] enabled` is false."""
    images, llm = settings.images, settings.llm
    if not images.enabled:
        return None
    key = images.api_key or llm.api_key
    fetcher = SafeDownloader(
        DownloadPolicy(
            max_bytes=MAX_IMAGE_BYTES,
            timeout_s=images.timeout_s,
            allow_private_hosts=tuple(settings.links.allow_hosts),
        ),
        resolver=resolver,
    )
    artist = Artist(
        ArtistSettings(
            base_url=images.base_url or llm.base_url or OPENAI_BASE_URL,
            api_key=key.get_secret_value() if key else None,
            model=images.model,
            size=images.size,
            quality=images.quality,
            timeout_s=images.timeout_s,
        ),
        fetcher,
    )
    stack.push_async_callback(artist.close)
    rules = DrawRules(
        allow=images.allow,
        admins=admins,
        max_per_user_per_day=images.max_per_user_per_day,
        max_per_chat_per_day=images.max_per_chat_per_day,
        max_pending_per_user=settings.jobs.max_per_user,
    )
    return Drawing(DrawDesk(jobs, rules, clock), artist)
