"""Hostile files and pages cannot take the daemon's memory, CPU or shutdown (issue 35).

A DOCX whose ZIP headers lie about its size is inflated in counted steps; every parse
runs in a child process with CPU-time and memory limits that is killed at its timeout.
The files are made here (tests/fakes/files.py): a 340 kB DOCX that inflates to 300 MB, a
12 kB PDF that keeps pypdf busy for minutes.
"""

from __future__ import annotations

import tracemalloc

import pytest

from core.media.documents import DOCX_TYPE, BadDocument, extract_document
from tests.fakes.files import make_lying_docx

MB = 1024 * 1024


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
