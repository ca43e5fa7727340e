"""The console's Moderation page: each group's rules and its newest actions, escaped, for a
signed-in operator only."""

from __future__ import annotations

from pathlib import Path

from memory.moderation.types import ActionDraft, Flood, GroupRules, Penalty
from tests.console.console_support import (
    ESCAPED,
    HOSTILE,
    client,
    console_settings,
    running,
    sign_in,
)
from tests.fakes.openai_server import FakeOpenAI


def draft(chat_id: str, key: str, penalty: Penalty, source: str) -> ActionDraft:
    return ActionDraft(
        platform="qq",
        chat_id=chat_id,
        key=key,
        user_id="20009",
        user_name=HOSTILE,
        penalty=penalty,
        message_id="77",
        reason="more than 5 messages in 10s",
        source=source,
    )


async def test_each_groups_rules_and_log_are_shown_escaped(
    tmp_path: Path, database_url: str
) -> None:
    async with FakeOpenAI(reply="unused") as model:
        settings = console_settings(tmp_path, database_url, model)
        async with running(settings) as daemon, client() as session:
            store = daemon.app.storage.moderation
            rules = GroupRules(
                welcome=f"Hi {{name}} {HOSTILE}",
                replies={"wifi": "On the fridge.", "hostile": HOSTILE},
                flood=Flood(5, 10, Penalty("mute", 600)),
                links=Penalty("delete"),
            )
            await store.set_rules("qq", "group:30003", rules, "qq:20001")
            muted = await store.begin(
                draft("group:30003", "flood:77", Penalty("mute", 600), "flood")
            )
            assert muted is not None
            await store.end(muted.id, "done")
            refused = draft("group:30004", "proposal:1", Penalty("kick"), "approved by Olga")
            kicked = await store.begin(refused)  # a group with no rules, only a report
            assert kicked is not None
            await store.end(kicked.id, "no_rights", "retcode 102")

            async with session.get(
                f"{daemon.base}/console/moderation", allow_redirects=False
            ) as page:
                assert page.status in (302, 303)  # signed out: nothing shown
            await sign_in(session, daemon.base)
            async with session.get(f"{daemon.base}/console/moderation") as page:
                assert page.status == 200
                html = await page.text()
    assert 'href="/console/moderation" aria-current="page">Moderation</a>' in html
    assert "<h2>qq:group:30003</h2>" in html and "<h2>qq:group:30004</h2>" in html
    assert HOSTILE not in html and html.count(ESCAPED) >= 3  # welcome, answer, member
    assert "more than 5 messages in 10s → mute 10m" in html
    assert "<td>“wifi”</td><td>On the fridge.</td>" in html
    assert "<td>mute 10m</td>" in html and "<td>flood</td><td>done</td>" in html
    assert "<td>kick</td>" in html and "<td>approved by Olga</td><td>no rights</td>" in html
    first, second = html.index("qq:group:30003"), html.index("qq:group:30004")
    assert first < html.index("<td>mute 10m</td>") < second < html.index("<td>kick</td>")
