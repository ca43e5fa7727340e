"""The console's Reminders page: every chat's reminders listed, and cancelled from there."""

from __future__ import annotations

from pathlib import Path

from tests.console.console_support import (
    ESCAPED,
    HOSTILE,
    client,
    console_settings,
    running,
    sign_in,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import msg


async def test_reminders_are_listed_per_chat_and_cancelled_from_the_console(
    tmp_path: Path, database_url: str
) -> None:
    async with FakeOpenAI(reply="unused") as model:
        settings = console_settings(tmp_path, database_url, model)
        async with running(settings) as daemon, client() as session:
            reminders = daemon.app.reminders
            assert reminders is not None
            for chat, text in (("group:30003", HOSTILE), ("private:20002", "tea")):
                group = chat.startswith("group")
                message = msg("", platform="qq", chat=chat, sender="20002", group=group)
                await reminders.set_from_text(message, f"in 2h {text}")
            token = await sign_in(session, daemon.base)
            async with session.get(f"{daemon.base}/console/reminders") as page:
                html = await page.text()
            assert "<h2>qq:group:30003</h2>" in html and "<h2>qq:private:20002</h2>" in html
            assert ESCAPED in html and HOSTILE not in html
            # Each row's Cancel form posts its id with the page's CSRF token.
            assert 'action="/console/reminders/cancel"' in html and "Cancel #2</button>" in html
            assert f'name="csrf" value="{token}"' in html and 'name="id" value="2"' in html
            form = {"csrf": token, "id": "2"}
            async with session.post(
                f"{daemon.base}/console/reminders/cancel", data=form, allow_redirects=False
            ) as done:
                assert done.status == 303
            async with session.get(f"{daemon.base}/console/reminders") as page:
                html = await page.text()
            assert "Cancelled #2." in html and "qq:private:20002" not in html
            refused = {"id": "1"}  # no CSRF token: refused, nothing cancelled
            async with session.post(
                f"{daemon.base}/console/reminders/cancel", data=refused, allow_redirects=False
            ) as done:
                assert done.status == 403
            listed = await reminders.store.listing()
            assert [r.id for r in listed] == [1]
