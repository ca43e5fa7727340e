"""The overview: channels, turns per hour, tokens per day, turn states, models, errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aiohttp import web

from bot.console.charts import Bar, bar_chart
from bot.console.page import PageHost


def add_routes(router: web.UrlDispatcher, console: PageHost) -> None:
    async def overview(request: web.Request) -> web.StreamResponse:
        return await _overview(console, request)

    router.add_get("/", overview)


async def _overview(console: PageHost, request: web.Request) -> web.Response:
    deps = console.deps
    now = deps.clock()
    channels = sorted(deps.health().items())
    try:
        extra = await deps.extra_health()
    except Exception:  # the page still shows what it can
        extra = {}
    hours = await console.activity.turns_per_hour(now)
    days = await console.activity.tokens_per_day(now.date())
    hour_ago = now - timedelta(hours=1)
    failed = await console.activity.failed_since(hour_ago)
    turns_chart = bar_chart(
        [
            Bar(
                label=f"{h.hour:%H}" if index % 3 == 0 else "",
                values=(h.answered, h.failed, h.open),
                tip=f"{h.hour:%Y-%m-%d %H}:00 UTC: {h.answered} answered, "
                f"{h.failed} failed or expired, {h.open} pending",
            )
            for index, h in enumerate(hours)
        ],
        ("ok", "bad", "open"),
        title="Turns per hour, last 24 hours",
    )
    tokens_chart = bar_chart(
        [
            Bar(
                label=f"{d.day:%d}" if index % 5 == 0 else "",
                values=(d.prompt, d.completion),
                tip=f"{d.day:%Y-%m-%d}: {d.prompt} prompt ({d.cached} cached) + "
                f"{d.completion} completion tokens",
            )
            for index, d in enumerate(days)
        ],
        ("prompt", "completion"),
        title="Tokens per day, last 30 days",
    )
    models: dict[str, list[dict[str, Any]]] = extra.get("models") or {}
    mcp: dict[str, dict[str, Any]] = extra.get("mcp") or {}  # only when servers are set
    tool_calls = await deps.storage.tool_calls.recent(20) if mcp else []
    return console.render(
        request,
        "overview.html",
        channels=channels,
        turns=extra.get("turns"),
        models=sorted(models.items()),
        mcp=sorted(mcp.items()),
        tool_calls=tool_calls,
        turns_chart=turns_chart,
        tokens_chart=tokens_chart,
        turns_total=sum(h.answered + h.failed + h.open for h in hours),
        tokens_total=sum(d.prompt + d.completion for d in days),
        cached_total=(cached := sum(d.cached for d in days)),
        hit_rate=f"{cached / prompt:.0%}" if (prompt := sum(d.prompt for d in days)) else "0%",
        failed=failed,
        errors=deps.errors.since(hour_ago),
    )
