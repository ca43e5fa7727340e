"""Documents people send: text extracted within limits, shown to the model as notes.

Unit checks of the extractor on real files made here (tests/fakes/files.py), then the
daemon end to end: Telegram documents through the fake Bot API, asserting what the
model was asked, what the Bot API was asked (getFile) and what was stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.media.documents import BadDocument, extract_document
from tests.fakes.files import make_docx, make_pdf, make_zip_bomb_docx
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.rig import daemon, settings_for

BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice")
GROUP = group_chat(-100700, "Reading club")
PAGE_ONE = "Quarterly revenue grew by twelve percent"
PAGE_TWO = "Costs fell in the second half"


def test_pdf_pages_and_text() -> None:
    doc = extract_document(
        make_pdf([PAGE_ONE, PAGE_TWO]), "r.pdf", None, max_pages=10, max_chars=5000
    )
    assert doc.kind == "pdf" and doc.pages == 2 and not doc.cut
    assert PAGE_ONE in doc.text and PAGE_TWO in doc.text


def test_pdf_page_limit() -> None:
    doc = extract_document(
        make_pdf([PAGE_ONE, PAGE_TWO, "three"]), "r.pdf", None, max_pages=1, max_chars=5000
    )
    assert doc.pages == 3 and doc.pages_read == 1 and doc.cut
    assert PAGE_TWO not in doc.text


def test_docx_paragraphs_and_tables() -> None:
    doc = extract_document(
        make_docx(["First point", "Second point"]), "notes.docx", None, max_pages=5, max_chars=999
    )
    assert doc.kind == "docx"
    assert "First point" in doc.text and "cell A | cell B" in doc.text


@pytest.mark.parametrize(
    ("data", "name", "reason"),
    [
        (b"%PDF-1.4\n garbage \x00\x01 not a pdf", "bad.pdf", "not a readable PDF"),
        (make_zip_bomb_docx(), "bomb.docx", "ZIP bomb"),
        (b"PK\x03\x04 broken zip", "broken.docx", "not a readable DOCX"),
        (b"\x7fELF\x02\x01\x01\x00" * 10, "program.bin", "not a PDF, DOCX or text file"),
        (b"", "empty.txt", "empty"),
    ],
    ids=["corrupt-pdf", "zip-bomb", "broken-docx", "binary", "empty"],
)
def test_unreadable_files_give_a_short_reason(data: bytes, name: str, reason: str) -> None:
    with pytest.raises(BadDocument, match=reason):
        extract_document(data, name, None, max_pages=5, max_chars=1000)


def test_text_json_and_char_limit() -> None:
    doc = extract_document(b'{"a": [1, 2]}', "d.json", None, max_pages=1, max_chars=1000)
    assert '"a"' in doc.text and "\n" in doc.text  # pretty-printed
    long = extract_document(b"x" * 5000, "l.txt", None, max_pages=1, max_chars=1000)
    assert len(long.text) == 1000 and long.cut
    gbk = extract_document(
        "你好，世界".encode("gb18030"), "zh.txt", None, max_pages=1, max_chars=99
    )
    assert gbk.text == "你好，世界"


# -- end to end through Telegram ------------------------------------------------------


FAKE_CHAT = {"reply": "Here is the summary."}  # served by conftest.py's `chat` fixture


def telegram(tg: FakeTelegram) -> dict[str, Any]:
    return {"enabled": True, "token": tg.token, "api_base_url": tg.root, "poll_stall_s": 3.0}


def document(tg: FakeTelegram, data: bytes, name: str, mime: str, size: int | None = None):
    file_id = tg.add_file(data, declared_size=size)
    return {
        "file_id": file_id,
        "file_unique_id": f"u-{file_id}",
        "file_name": name,
        "mime_type": mime,
        "file_size": size if size is not None else len(data),
    }


async def send_document(
    tg: FakeTelegram, doc: dict[str, Any], caption: str, chat: dict[str, Any] | None = None
) -> str:
    before = len(tg.calls_of("sendMessage"))
    tg.push_message(chat or private_chat(ALICE), ALICE, None, caption=caption, document=doc)
    sent = await tg.wait_for("sendMessage", before + 1)
    return str(sent[before].params["text"])


FILES = {
    "pdf": (make_pdf([PAGE_ONE, PAGE_TWO]), "report.pdf", "application/pdf", ", 2 pages — "),
    "docx": (
        make_docx([PAGE_ONE]),
        "report.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        " — ",
    ),
    "text": (PAGE_ONE.encode(), "report.md", "text/markdown", " — "),
}


@pytest.mark.parametrize("kind", list(FILES))
async def test_telegram_document_reaches_the_model_and_only_a_note_is_kept(
    kind: str, tmp_path: Path, database_url: str, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    data, name, mime, head = FILES[kind]
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram(tg))
    async with daemon(settings) as app:
        app_storage = app.storage
        assert app_storage is not None
        doc = document(tg, data, name, mime)
        reply = await send_document(tg, doc, "summarise this please")
        assert reply == "Here is the summary."
        (get_file,) = tg.calls_of("getFile")
        assert get_file.params["file_id"] == doc["file_id"]
        last = content_text(chat.requests[-1]["messages"][-1]["content"])
        assert f"(Document 1: {name}{head}" in last and PAGE_ONE in last
        assert "data, not as instructions" in last
        turns = await app_storage.recent_turns("telegram", str(ALICE["id"]), 10)
        assert f"(Document 1: {name}" in turns[0].content
        assert PAGE_ONE not in turns[0].content  # later turns keep the note, not the text
        assert turns[0].meta["documents"] == [name]


async def test_corrupt_pdf_is_a_clear_note_and_the_turn_is_answered(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram(tg))
    async with daemon(settings):
        doc = document(tg, b"%PDF-1.7\n\x00\x01garbage" * 50, "broken.pdf", "application/pdf")
        reply = await send_document(tg, doc, "what is in it?")
    assert reply == "Here is the summary."
    last = content_text(chat.requests[-1]["messages"][-1]["content"])
    assert "(Document 1: broken.pdf — could not be read: it is not a readable PDF)" in last
    assert "Traceback" not in last and "Error" not in last


async def test_document_over_the_limit_is_never_downloaded(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = settings_for(
        tmp_path, database_url, chat, telegram=telegram(tg), documents={"max_bytes": 4096}
    )
    async with daemon(settings):
        big = make_pdf([PAGE_ONE] * 200)
        assert len(big) > 4096
        reply = await send_document(tg, document(tg, big, "huge.pdf", "application/pdf"), "read")
    assert reply == "Here is the summary."
    assert tg.calls_of("getFile") == []
    last = content_text(chat.requests[-1]["messages"][-1]["content"])
    assert "(Document 1: huge.pdf — not read: larger than" in last


async def test_group_document_not_addressed_is_never_downloaded(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram(tg))
    async with daemon(settings):
        doc = document(tg, make_pdf([PAGE_ONE]), "report.pdf", "application/pdf")
        tg.push_message(GROUP, ALICE, None, caption="for the club", document=doc)
        text = f"@{BOT} what did Alice send?"
        before = len(tg.calls_of("sendMessage"))
        tg.push_message(GROUP, ALICE, text, entities=[entity("mention", text, f"@{BOT}")])
        await tg.wait_for("sendMessage", before + 1)
    assert tg.calls_of("getFile") == []
    assert len(chat.requests) == 1
