"""`/kb add` as a reply to a PDF shared in a Telegram group, through the fake Bot API.

What must hold: the replied-to file is downloaded (getFile) and indexed with its page
numbers; the group's next addressed question carries the passage and `report.pdf · p. 2`
in the model request; another group's request does not; a non-admin's `/kb add` in the
group is refused. Embeddings from the fake OpenAI server's `/v1/embeddings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.files import make_pdf
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, user
from tests.rig import daemon, settings_for, telegram_section

BOT = "chatterd_test_bot"
ALICE, BOB = user(1001, "Alice"), user(1002, "Bob")
CLUB, OTHER = group_chat(-100700, "Reading club"), group_chat(-100800, "Other group")
PAGE_ONE = "Welcome to the reading club handbook."
PAGE_TWO = "Quarterly revenue of the club shop grew by twelve percent thanks to used books."


FAKE_CHAT = {"reply": "Noted."}  # served by conftest.py's `chat` fixture


async def say(tg: FakeTelegram, group: dict[str, Any], who: dict[str, Any], text: str, **f: Any):
    """Send `text` in `group` and wait for the bot's answer; its text."""
    before = len(tg.calls_of("sendMessage"))
    if text.startswith("/"):
        f.setdefault("entities", [entity("bot_command", text, text.split()[0])])
    elif text.startswith("@"):
        f.setdefault("entities", [entity("mention", text, f"@{BOT}")])
    tg.push_message(group, who, text, **f)
    sent = await tg.wait_for("sendMessage", before + 1)
    return str(sent[before].params["text"])


async def test_kb_add_as_a_reply_to_a_shared_pdf(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, fake: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        telegram=telegram_section(tg),
        bot={"admins": ["telegram:1001"]},
        knowledge={"embeddings": "openai", "base_url": fake.base_url},
    )
    async with daemon(settings):
        data = make_pdf([PAGE_ONE, PAGE_TWO])
        file_id = tg.add_file(data)
        doc = {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_name": "report.pdf",
            "mime_type": "application/pdf",
            "file_size": len(data),
        }
        shared = tg.push_message(CLUB, BOB, None, caption="the handbook", document=doc)

        refused = await say(tg, CLUB, BOB, "/kb add", reply_to_message=shared)
        assert refused.startswith("Only admins can add"), refused
        assert tg.calls_of("getFile") == []

        before = len(tg.calls_of("sendMessage"))
        added = await say(tg, CLUB, ALICE, "/kb add", reply_to_message=shared)
        assert added.startswith("📚 adding report.pdf (job #1)"), added
        done = (await tg.wait_for("sendMessage", before + 2))[before + 1].params
        assert done["text"].startswith("📚 added report.pdf (#1): "), done  # the job's line
        assert done["reply_parameters"] is not None  # in a group: a reply to the /kb add
        assert [c.params["file_id"] for c in tg.calls_of("getFile")] == [file_id]

        await say(tg, CLUB, BOB, f"@{BOT} how did sales at the shop go?")
        seen = "\n".join(content_text(m.get("content")) for m in chat.requests[-1]["messages"])
        assert "twelve percent" in seen and "report.pdf · p. 2" in seen

        await say(tg, OTHER, BOB, f"@{BOT} how did sales at the shop go?")
        other = "\n".join(content_text(m.get("content")) for m in chat.requests[-1]["messages"])
        assert "twelve percent" not in other and "report.pdf" not in other
