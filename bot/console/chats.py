"""Chats: the list (search, keyset pages), and one chat: its conversation as the model
saw it, the context picture of its last turn, and its settings (the `/bot` store)."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from bot.console.page import PageHost, actor, flash, see_other, url
from bot.console.params import chat_cursor, row_id
from bot.console.picture import drawn_picture, was_dropped
from memory.chats.settings import ChatSettingsError
from memory.chats.types import ChatKey
from memory.db.rows import ID_LEN, PLATFORM_LEN

PAGE = 50
TURNS_SHOWN = 60
FOLDED_KINDS = {"tool_call", "tool_result", "summary"}


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    async def chats(request: web.Request) -> web.StreamResponse:
        query = request.query
        search = query.get("q", "")[:200]
        after = chat_cursor(query.get("after"), "after")
        page = await console.browse.chats(limit=PAGE, after=after, search=search)
        return console.render(request, "chats.html", page=page, search=search)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await _chat(console, request)

    async def save(request: web.Request) -> web.StreamResponse:
        return await _save_settings(console, request)

    router.add_get("/chats", chats)
    router.add_get("/chat", chat)
    router.add_post("/chat/settings", save)


def platform_and_id(values: Mapping[str, object]) -> tuple[str, str]:
    """(platform, id) of a chat or a person from a query or a form; 404 when missing or
    too long."""
    platform, chat_id = values.get("platform"), values.get("id")
    if not isinstance(platform, str) or not isinstance(chat_id, str):
        raise web.HTTPNotFound(text="no such chat or person")
    if not 0 < len(platform) <= PLATFORM_LEN or not 0 < len(chat_id) <= ID_LEN:
        raise web.HTTPNotFound(text="no such chat or person")
    return platform, chat_id


async def _chat(console: PageHost, request: web.Request) -> web.Response:

    chat = ChatKey(*platform_and_id(request.query))
    platform, chat_id = chat.platform, chat.chat_id
    deps = console.deps
    row = await console.browse.chat(platform, chat_id)
    if row is None:
        return console.missing(request, f"chat {platform}:{chat_id}")
    before_id = row_id(request.query.get("before"), "before")
    turns = await deps.storage.recent_turns(platform, chat_id, TURNS_SHOWN, before_id)
    report = deps.last_report(platform, chat_id)
    drawn = drawn_picture(report) if report is not None else None
    settings = await deps.chat_settings.get(chat)
    older = (
        url("/chat", platform=platform, id=chat_id, before=turns[0].id)
        if len(turns) == TURNS_SHOWN
        else None
    )
    return console.render(
        request,
        "chat.html",
        chat=row,
        turns=[(turn, was_dropped(turn.id, report)) for turn in turns],
        folded=FOLDED_KINDS,
        drawn=drawn,
        settings=settings,
        older=older,
    )


async def _save_settings(console: PageHost, request: web.Request) -> web.StreamResponse:

    form = await request.post()
    chat = ChatKey(*platform_and_id(form))
    store = console.deps.chat_settings
    by = actor(request)
    try:
        if form.get("action") == "reset":
            await store.reset(chat, by=by)
            flash(request, "Persona and wake words are back to the defaults.")
        else:
            allowed = {"allow": True, "deny": False}.get(str(form.get("allowed", "")))
            words = [w for w in str(form.get("wake_words", "")).split(",") if w.strip()]
            await store.update(
                chat,
                by=by,
                enabled=form.get("enabled") == "on",
                allowed=allowed,
                persona=str(form.get("persona", "")),
                wake_words=words,
            )
            flash(request, "Settings saved.")
    except ChatSettingsError as refused:
        flash(request, f"Not saved: {refused}")
    return see_other(url("/chat", platform=chat.platform, id=chat.chat_id))
