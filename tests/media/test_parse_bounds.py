"""Hostile files and pages cannot take the daemon's memory, CPU or shutdown (issue 35).

A DOCX whose ZIP headers lie about its size is inflated in counted steps; every parse
runs in a child process with CPU-time and memory limits that is killed at its timeout.
The files are made here (tests/fakes/files.py): a 340 kB DOCX that inflates to 300 MB, a
12 kB PDF that keeps pypdf busy for minutes.
"""

from __future__ import annotations

import asyncio
import io
import resource
import tracemalloc
import zipfile

import pytest

from core.media.attachments import DocumentLimits, SharedReader
from core.media.documents import DOCX_TYPE, BadDocument, extract_document
from core.media.fetch import DownloadPolicy, SafeDownloader
from core.media.links import PageError, PageReader
from core.media.sandbox import ParseFailed, ParseLimits, ParseSandbox, _child_env
from core.media.shared import neutralise
from core.messages import Attachment, InboundMessage
from tests.fakes.dns import MapResolver
from tests.fakes.files import (
    make_docx,
    make_lying_docx,
    make_pdf,
    make_spinning_pdf,
)
from tests.fakes.page_server import PageServer
from tests.rig import msg

MB = 1024 * 1024
NEWS = "news.example"


def test_docx_whose_headers_lie_is_never_inflated_past_the_cap() -> None:
    bomb = make_lying_docx(300)  # headers claim 1 kB; word/document.xml inflates to 300 MB
    assert len(bomb) < MB
    tracemalloc.start()
    try:
        with pytest.raises(BadDocument):
            extract_document(bomb, "report.docx", DOCX_TYPE, max_pages=5, max_chars=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * MB, f"{peak / MB:.0f} MB allocated"


def make_big_docx(paragraphs: int) -> bytes:
    """An honest DOCX (sizes true, ratio modest) whose XML needs hundreds of MB to parse."""
    body = "".join(
        f"<w:p><w:r><w:t>paragraph {i} of the minutes, {i * 7919 % 10007}</w:t></w:r></w:p>"
        for i in range(paragraphs)
    )
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(make_docx(["x"]))) as real,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy,
    ):
        for info in real.infolist():
            data = real.read(info)
            if info.filename == "word/document.xml":
                head, _, _ = data.partition(b"<w:body>")
                data = head + f"<w:body>{body}</w:body></w:document>".encode()
            copy.writestr(info.filename, data)
    return out.getvalue()


def shared(data: bytes, name: str, mime: str) -> InboundMessage:
    async def fetch() -> bytes:
        return data

    document = Attachment(kind="document", fetch=fetch, name=name, mime=mime, size=len(data))
    return msg("read this", attachments=(document,))


def usage(who: int) -> float:
    got = resource.getrusage(who)
    return got.ru_utime + got.ru_stime


async def test_spinning_pdf_is_stopped_at_its_cpu_limit_in_a_child() -> None:
    sandbox = ParseSandbox(ParseLimits(cpu_s=2))
    reader = SharedReader(documents=DocumentLimits(timeout_s=300), sandbox=sandbox)
    own, children = usage(resource.RUSAGE_SELF), usage(resource.RUSAGE_CHILDREN)
    notes = await reader(shared(make_spinning_pdf(), "report.pdf", "application/pdf"))
    own, children = usage(resource.RUSAGE_SELF) - own, usage(resource.RUSAGE_CHILDREN) - children
    assert "(Document 1: report.pdf — could not be read: it took too long to read)" in notes.notes
    assert children >= 1.5  # the child spent (about) its allowance...
    assert own < 1.5, f"the daemon itself spent {own:.1f} CPU-seconds"  # ...not the daemon


async def test_memory_hungry_docx_is_read_in_part_in_a_small_child() -> None:
    big = make_big_docx(400_000)  # ~30 MB of XML: python-docx needed over 200 MB for it
    sandbox = ParseSandbox(ParseLimits(memory_mb=200))
    reader = SharedReader(documents=DocumentLimits(), sandbox=sandbox)
    tracemalloc.start()
    try:
        notes = await reader(shared(big, "minutes.docx", DOCX_TYPE))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = " ".join(notes.notes)
    assert "paragraph 0 of the minutes" in text
    assert "read only in part: its first 12000 characters; the rest was not read" in text
    assert peak < 32 * MB, f"{peak / MB:.0f} MB allocated in the daemon"


async def test_good_files_read_the_same_through_the_child() -> None:
    reader = SharedReader(documents=DocumentLimits())
    for data, name, mime in (
        (make_pdf(["Quarterly revenue grew"]), "r.pdf", "application/pdf"),
        (make_docx(["Quarterly revenue grew"]), "r.docx", DOCX_TYPE),
    ):
        notes = await reader(shared(data, name, mime))
        assert "Quarterly revenue grew" in " ".join(notes.notes)
        direct = extract_document(data, name, mime, max_pages=50, max_chars=12_000)
        assert neutralise(direct.text) in " ".join(notes.notes)


def test_the_child_inherits_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATTERD_LLM__API_KEY", "sk-secret")
    env = _child_env()
    assert set(env) == {"PYTHONPATH", "LC_ALL", "PATH"}
    assert "sk-secret" not in " ".join(env.values())


async def test_a_costly_page_is_parsed_in_a_limited_child() -> None:
    policy = DownloadPolicy(max_bytes=8 * MB, timeout_s=10.0, allow_private_hosts=(NEWS,))
    downloader = SafeDownloader(policy, resolver=MapResolver({NEWS: "127.0.0.1"}))
    sandbox = ParseSandbox(ParseLimits(cpu_s=1))
    reader = PageReader(downloader, sandbox=sandbox, parse_bytes=8 * MB)  # all of it parsed
    async with PageServer() as pages:
        own, children = usage(resource.RUSAGE_SELF), usage(resource.RUSAGE_CHILDREN)
        with pytest.raises(PageError, match="took too long"):
            await reader.read(f"http://{NEWS}:{pages.port}/heavy")  # ~15 CPU-s in trafilatura
        own = usage(resource.RUSAGE_SELF) - own
        children = usage(resource.RUSAGE_CHILDREN) - children
    assert pages.hits == ["heavy"]
    assert children >= 0.75
    assert own < 1.5, f"the daemon itself spent {own:.1f} CPU-seconds"


async def test_close_kills_a_running_parse_and_refuses_new_ones() -> None:
    sandbox = ParseSandbox()
    args = {"name": "spin.pdf", "mime": None, "max_pages": 50, "max_chars": 1000}
    parse = asyncio.create_task(sandbox.run("document", args, make_spinning_pdf(), max_reply=MB))
    for _ in range(600):  # until the child is up
        if sandbox.running or parse.done():
            break
        await asyncio.sleep(0.05)
    assert sandbox.running == 1
    await sandbox.close()  # what the daemon's stop does
    with pytest.raises(ParseFailed):
        await parse
    assert sandbox.running == 0
    with pytest.raises(ParseFailed, match="stopping"):
        await sandbox.run("document", args, make_pdf(["x"]), max_reply=MB)
