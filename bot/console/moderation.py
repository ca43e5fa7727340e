"""Moderation: each group's rules (`/mod`) and its recent actions, read only.

The same rows `/mod rules`, `/mod reply` and `/mod log` read, so the console has no rules
of its own; changing a group's rules stays a group admin's `/mod`, said in the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from bot.console.page import PageHost
from core.inject import clean_name
from memory.moderation.types import GroupRules, ModAction, Penalty

SHOWN = 300  # the newest actions over every group


@dataclass
class GroupView:
    """One group on the page: its rules as lines, and its newest actions."""

    title: str
    rules: list[tuple[str, str]] = field(default_factory=list)
    replies: list[tuple[str, str]] = field(default_factory=list)
    actions: list[dict[str, str]] = field(default_factory=list)


def rule_lines(rules: GroupRules) -> list[tuple[str, str]]:
    flood = rules.flood
    return [
        ("Welcome", rules.welcome or "off"),
        (
            "Flood",
            f"more than {flood.count} messages in {flood.seconds}s → {flood.penalty.label()}"
            if flood
            else "off",
        ),
        ("Newcomers' links", rules.links.label() if rules.links else "off"),
        ("Rules for reports", rules.rules or "none set"),
    ]


def action_row(action: ModAction) -> dict[str, str]:
    return {
        "id": str(action.id),
        "when": f"{action.created_at:%Y-%m-%d %H:%M}",
        "what": Penalty(action.kind, action.seconds).label(),
        "who": f"{clean_name(action.user_name, action.user_id)} ({action.user_id})",
        "why": action.reason,
        "source": action.source,
        "state": action.state.replace("_", " "),
    }


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    async def page(request: web.Request) -> web.StreamResponse:
        store = console.deps.storage.moderation
        groups: dict[tuple[str, str], GroupView] = {}
        for platform, chat_id, rules in await store.all_rules():
            view = groups[(platform, chat_id)] = GroupView(f"{platform}:{chat_id}")
            view.rules = rule_lines(rules)
            view.replies = sorted(rules.replies.items())
        for action in await store.recent(SHOWN):
            key = (action.platform, action.chat_id)
            view = groups.setdefault(key, GroupView(f"{key[0]}:{key[1]}"))
            view.actions.append(action_row(action))
        shown = [groups[key] for key in sorted(groups)]
        enabled = console.deps.settings.moderation.enabled
        return console.render(request, "moderation.html", groups=shown, enabled=enabled)

    router.add_get("/moderation", page)
