"""The console with its pages: which pages there are is said here, once."""

from __future__ import annotations

from bot.console import chats, feeds, jobs, moderation, overview, people, reminders, settings
from bot.console.knowledge import UPLOAD_PATH, knowledge_page
from bot.console.page import ConsoleDeps, Page
from bot.console.web import Console

PAGES: tuple[Page, ...] = (
    overview.add_routes,
    chats.add_routes,
    people.add_routes,
    settings.add_routes,
    reminders.add_routes,
    feeds.add_routes,
    jobs.add_routes,
    moderation.add_routes,
)


def console_site(deps: ConsoleDeps, password: str) -> Console:
    """The operator's console serving every page (Knowledge when `deps.knowledge`)."""
    knowledge = deps.knowledge
    if knowledge is None:
        return Console(deps, password, pages=PAGES)
    return Console(
        deps,
        password,
        pages=(*PAGES, knowledge_page(knowledge)),
        nav=(("Knowledge", "/knowledge"),),
        uploads={UPLOAD_PATH: knowledge.upload_limit},
    )
