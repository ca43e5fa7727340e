"""A huge shared document is read only as far as the model's text budget (issue 44).

The files are made here (tests/fakes/files.py): a 3,000-page PDF of about 11 MB and a
DOCX holding 50 MB of XML. The chat reads the first pages or paragraphs, in a child with
the document job's own limits, and the note says the rest was not read; the knowledge
base still reads a whole PDF, page by page, through the same sandbox.
"""

from __future__ import annotations

import tracemalloc

from core.knowledge.reading import SandboxReader
from core.media.attachments import DocumentLimits, SharedReader
from core.media.documents import DOCX_TYPE, extract_document
from core.media.sandbox import ParseSandbox
from core.messages import Attachment, InboundMessage
from tests.fakes.files import make_long_docx, make_long_pdf
from tests.rig import msg

MB = 1024 * 1024


def shared(data: bytes, name: str, mime: str) -> InboundMessage:
    async def fetch() -> bytes:
        return data

    document = Attachment(kind="document", fetch=fetch, name=name, mime=mime, size=len(data))
    return msg("read this", attachments=(document,))


async def test_a_3000_page_pdf_is_read_in_part_and_the_note_says_so() -> None:
    pdf = make_long_pdf(3000)
    assert len(pdf) > 10 * 1_000_000
    reader = SharedReader(documents=DocumentLimits(max_bytes=20 * MB))
    notes = await reader(shared(pdf, "annual.pdf", "application/pdf"))
    text = " ".join(notes.notes)
    assert "annual.pdf, 3000 pages — The quick brown fox" in text
    squeezed = " ".join(text.split())
    assert "page 1." in squeezed and "page 3000." not in squeezed
    assert "(read only in part: pages 1-" in text and " of 3000, at most 12000 characters" in text
    assert "the rest was not read" in text
    assert "sent and read on that turn" in " ".join(notes.short)


async def test_a_note_cut_to_fit_the_window_still_says_the_pdf_was_read_in_part() -> None:
    """The daemon fits a message's notes to a share of the window: the cut keeps the
    pages-read line, or the model would answer as if it had read all 3,000 pages."""
    pdf = make_long_pdf(3000)
    reader = SharedReader(
        documents=DocumentLimits(max_bytes=20 * MB),
        count=lambda text: len(text) // 4,
        max_tokens=500,
    )
    note = (await reader(shared(pdf, "annual.pdf", "application/pdf"))).notes[-1]
    assert note.endswith(" of 3000, at most 12000 characters; the rest was not read))"), note
    assert "cut to fit the context window; read only in part: pages 1-" in note
    assert len(note) // 4 <= 500


async def test_a_docx_of_50_mb_of_xml_is_read_in_part_and_the_note_says_so() -> None:
    docx = make_long_docx(150_000)  # 52 MB of XML in a 0.6 MB file
    reader = SharedReader(documents=DocumentLimits())
    notes = await reader(shared(docx, "minutes.docx", DOCX_TYPE))
    text = " ".join(notes.notes)
    assert "minutes.docx — 0 lorem ipsum" in text
    assert "149999 lorem" not in text
    assert "(read only in part: its first 12000 characters; the rest was not read)" in text


def test_the_docx_reader_holds_one_paragraph_at_a_time() -> None:
    docx = make_long_docx(150_000)
    tracemalloc.start()
    try:
        doc = extract_document(docx, "m.docx", DOCX_TYPE, max_pages=1, max_chars=2_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert doc.cut and len(doc.text) == 2_000_000
    # The text kept, plus a step of inflated XML and the paragraph at hand (lxml's own
    # tree is outside tracemalloc; the child's RLIMIT_AS covers it).
    assert peak < 3 * 2_000_000 + 8 * MB, f"{peak / MB:.0f} MB allocated"


def test_a_small_docx_reads_whole_with_its_table_in_order() -> None:
    docx = make_long_docx(3)
    doc = extract_document(docx, "m.docx", DOCX_TYPE, max_pages=1, max_chars=12_000)
    assert not doc.cut
    assert doc.text.splitlines()[0].startswith("0 lorem ipsum")
    assert doc.text.splitlines()[-1] == "cell A | cell B"


async def test_the_knowledge_base_still_reads_every_page_of_a_long_pdf() -> None:
    pdf = make_long_pdf(400)
    reader = SandboxReader(ParseSandbox(), max_chars=4_000_000, max_file_bytes=20 * MB)
    pages = await reader.pages(pdf, "handbook.pdf")
    assert len(pages) == 400
    assert pages[0].locator == "p. 1" and pages[-1].locator == "p. 400"
    assert "page    400." in pages[-1].text
