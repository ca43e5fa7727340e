"""The web console in a real browser: headless Chromium (Debian's `chromium` package)
driven by Playwright, against the real daemon with Telegram on the fake Bot API server.

An operator's session: sign in, look at the overview, find the group the test talked to
through Telegram, check that the context picture's segments add up to the reported total,
add a memory for Alice and see it reach the model, forget it through the page and see it
gone from the next model request, look at settings, sign out. Screenshots of each page go
to docs/console/latest/ (the README names the folder; the committed ones sit beside it).

Playwright's own browser download cannot be reached from these machines, so the test
uses the system Chromium (`executable_path`); without it, the test is skipped with one
line saying what to install (tests/conftest.py prints it).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.usage.types import UsageScope
from tests.console.console_support import PASSWORD, add_usage, console_settings, running
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, user

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console" / "latest"
BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice", "Liddell", username="alice")
GROUP = group_chat(-100500, "Tea party")
FACT = "likes green tea"
# About 80 tokens: in a 1,060-token window, the oldest turns fall out by the fourth message.
CHATTER = (
    "We are planning the afternoon tea for the whole reading club next Saturday, with "
    "scones, cucumber sandwiches, lemon cake and three kinds of jam, and we still argue "
    "about whether the milk goes in first or last, and about who brings the big teapot."
)

try:
    from playwright.async_api import Page, async_playwright
except ImportError:  # the [dev] extra brings it; a bare install may not have it
    async_playwright = None  # type: ignore[assignment]

SKIP_REASON = (
    "browser tests skipped: no Chromium at /usr/bin/chromium "
    "(apt-get install chromium) or no playwright (pip install -e '.[dev]')"
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists() or async_playwright is None, reason=SKIP_REASON),
]


def browser_available() -> bool:
    return CHROMIUM.exists() and async_playwright is not None


FAKE_CHAT = {"reply": "Happy to help."}  # served by conftest.py's `model` fixture


async def say_in_group(tg: FakeTelegram, text: str) -> None:
    """Alice mentions the bot in the group; wait until it answered."""
    before = len(tg.calls_of("sendMessage"))
    words = f"@{BOT} {text}"
    tg.push_message(GROUP, ALICE, words, entities=[entity("mention", words, f"@{BOT}")])
    await tg.wait_for("sendMessage", before + 1)


def system_text(body: dict[str, Any]) -> str:
    """Every system message's text: the stable head and this turn's tail after the history."""
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    return "\n\n".join(content_text(m["content"]) for m in messages if m["role"] == "system")


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def test_an_operator_session_in_chromium(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    telegram = {"enabled": True, "token": tg.token, "api_base_url": tg.root, "poll_stall_s": 3.0}
    small = {"context_window": 1060, "reply_tokens": 200}
    # the window is sized for the starter persona and built-in tools: small enough that the
    # oldest turns fall out, large enough that a remembered fact still fits
    settings = console_settings(
        tmp_path,
        database_url,
        model,
        telegram=telegram,
        llm=small,
        context={"compaction": False},
        links={"read_tool": False},
    )
    async with running(settings) as run, async_playwright() as driver:
        for question in ("what should we drink?", "and with it?", "who comes?", "when?"):
            await say_in_group(tg, f"{question} {CHATTER}")
        today = datetime.now(UTC).date()
        await add_usage(
            run.app.storage,
            [
                {
                    "day": today - timedelta(days=n),
                    "platform": "telegram",
                    "chat_id": str(GROUP["id"]),
                    "prompt_tokens": 900 + 150 * (n % 5),
                    "completion_tokens": 120 + 40 * (n % 3),
                }
                for n in range(12)
            ],
        )
        browser = await driver.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = await browser.new_page(viewport={"width": 1200, "height": 800})
            complaints: list[str] = []  # CSP refusals, script errors, failed loads
            page.on("console", lambda m: complaints.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: complaints.append(str(error)))
            await operator_session(page, run.base, run.app, model, tg)
            # The wrong password's 403 is the only error the browser saw.
            assert [c for c in complaints if "403" not in c] == [], complaints
            phone = await browser.new_page(viewport={"width": 390, "height": 844})
            await phone.goto(f"{run.base}/console/sign-in")
            await sign_in(phone)
            await phone.goto(f"{run.base}/console/chats")
            await phone.get_by_role("link", name="Tea party").click()
            await shot(phone, "chat-phone")
            width = await phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, "the chat page scrolls sideways on a phone"
        finally:
            await browser.close()


async def sign_in(page: Page) -> None:
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(re.compile(r"/console/(\?.*)?$|/console/chats$"))


async def operator_session(
    page: Page, base: str, app: Any, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    # Signed out, the console sends the browser to the sign-in form.
    await page.goto(f"{base}/console/")
    assert "/console/sign-in" in page.url
    await shot(page, "sign-in")
    await page.get_by_label("Password").fill("not the password")
    await page.get_by_role("button", name="Sign in").click()
    assert await page.get_by_role("alert").inner_text() == "That password is wrong."
    await sign_in(page)
    assert await page.locator("h1").inner_text() == "Overview"
    assert await page.locator("svg.chart").count() == 2
    telegram_state = page.locator("tr", has_text="telegram").locator(".state")
    assert await telegram_state.inner_text() == "running"
    await shot(page, "overview")

    # Chats: the Telegram group, by its title, with its turns.
    await page.get_by_role("link", name="Chats").click()
    row = page.locator("table.list tbody tr", has_text="Tea party")
    assert "group" in await row.inner_text()
    await shot(page, "chats")
    await row.get_by_role("link", name="Tea party").click()
    assert await page.locator("h1").inner_text() == "Tea party"

    # The context picture: its parts add up to the reported total, and to the window.
    report = app.processor.last_report("telegram", str(GROUP["id"]))
    figure = page.locator("figure.context-picture")
    assert int(await figure.get_attribute("data-total")) == report.total_tokens
    segments = page.locator("li.segment")
    keys = await segments.evaluate_all("els => els.map(e => e.dataset.key)")
    tokens = [int(t) for t in await segments.evaluate_all("els => els.map(e => e.dataset.tokens)")]
    inside = sum(t for k, t in zip(keys, tokens, strict=True) if k not in ("reserve", "free"))
    assert inside == report.total_tokens
    assert sum(tokens) == report.window
    assert "history" in keys and "current" in keys and "reserve" in keys
    window_bar = page.locator("svg.picture:not(.zoom) rect.seg")
    assert await window_bar.count() == len([t for t in tokens if t])
    assert await page.locator("svg.picture.zoom rect.seg").count() == len(
        [k for k, t in zip(keys, tokens, strict=True) if t and k not in ("reserve", "free")]
    )
    turns = page.locator("ol.turns li.turn")
    assert await turns.count() == 8  # four messages from Alice, four answers
    first = await turns.first.inner_text()
    assert "[Alice Liddell]: @chatterd_test_bot what should we drink?" in first
    # The oldest turns fell out of the last context, and the page marks exactly those.
    assert report.history_dropped >= 1
    assert await page.locator("li.turn.dropped").count() == report.history_dropped
    assert "dropped from the last context" in first
    # Tokens spent in the group, from the usage table.
    seeded = sum(900 + 150 * (n % 5) + 120 + 40 * (n % 3) for n in range(12))
    today = datetime.now(UTC).date()
    scope = UsageScope(platform="telegram", chat_id=str(GROUP["id"]))
    total = await app.storage.usage.totals(today - timedelta(days=400), today, scope)
    assert total.tokens > seeded  # the four real turns were counted too
    spent = total.tokens
    assert f"tokens{spent}" in (await page.locator("dl.facts").inner_text()).replace("\n", "")
    await shot(page, "chat")

    # People: add a memory for Alice through the page; the model sees it next turn.
    await page.get_by_role("link", name="People").click()
    await page.get_by_role("link", name="Alice Liddell").click()
    await page.get_by_label("Remember").fill(FACT)
    await page.get_by_role("button", name="Add").click()
    assert await page.get_by_role("status").inner_text() == "Saved."
    memory = page.locator("li.memory", has_text=FACT)
    assert await memory.count() == 1
    await say_in_group(tg, "remember me?")
    assert FACT in system_text(model.requests[-1])
    await shot(page, "person")

    # Forget it through the page: gone from the page and from the next model request.
    await memory.get_by_role("button", name="Forget").click()
    assert await page.get_by_role("status").inner_text() == "Forgotten."
    assert await page.locator("li.memory").count() == 0
    await say_in_group(tg, "and now?")
    assert FACT not in system_text(model.requests[-1])
    assert "and now?" in content_text(model.requests[-1]["messages"][-1]["content"])

    # Settings: the effective config, the password masked.
    await page.get_by_role("link", name="Settings").click()
    web_rows = page.locator("table.config").nth(await _section_index(page, "web"))
    assert '"***"' in await web_rows.inner_text()
    assert PASSWORD not in await page.content()
    await shot(page, "settings")

    # Sign out: back to the form, and the pages are closed again.
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url(re.compile(r"/console/sign-in$"))
    await page.goto(f"{base}/console/people")
    assert "/console/sign-in" in page.url


async def _section_index(page: Page, name: str) -> int:
    titles = await page.locator("h3").all_inner_texts()
    return titles.index(f"[{name}]")
