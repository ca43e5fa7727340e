"""Settings: the effective config with every secret masked, and the chats whose settings
admins changed (each editable on its chat's page, through the `/bot` commands' store)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from sqlalchemy.engine import make_url

from bot.config import mask_secrets
from bot.console.page import PageHost
from bot.console.params import row_id

PAGE = 100


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    async def settings(request: web.Request) -> web.StreamResponse:
        after_id = row_id(request.query.get("after"), "after")
        chats = await console.deps.chat_settings.listing(PAGE + 1, after_id)
        more = len(chats) > PAGE
        chats = chats[:PAGE]
        return console.render(
            request,
            "settings.html",
            sections=effective_config(console),
            chats=chats,
            next=str(chats[-1].id) if more and chats else None,
        )

    router.add_get("/settings", settings)


def effective_config(console: PageHost) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(section, [(key, value as TOML-ish text)])], secrets as `***`, the database
    URL without its password."""
    data: dict[str, Any] = mask_secrets(console.deps.settings)
    storage = data.get("storage", {})
    if isinstance(storage.get("url"), str):
        try:
            storage["url"] = make_url(storage["url"]).render_as_string(hide_password=True)
        except Exception:
            storage["url"] = "***"
    return [
        (section, [(key, json.dumps(value, ensure_ascii=False)) for key, value in values.items()])
        for section, values in data.items()
        if isinstance(values, dict)
    ]
