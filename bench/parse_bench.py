"""Peak memory and CPU of the daemon's side while it reads hostile files and pages (issue 35).

Each case runs in a fresh interpreter (ru_maxrss is a lifetime peak) that reads the input
the way the daemon does: documents through SharedReader, pages through the sandbox's
"page" job. Printed: the reading process's peak RSS, its own CPU seconds, the parse
children's CPU seconds and peak RSS, the wall time and the note the model would get.

    .venv/bin/python -m bench.parse_bench            # every case
    .venv/bin/python -m bench.parse_bench docx-bomb  # one
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.media.attachments import DocumentLimits, SharedReader
from core.media.documents import DOCX_TYPE
from core.media.links import PAGE_CPU_S, PAGE_MEMORY_MB
from core.media.page_text import page_budget
from core.media.sandbox import ParseSandbox
from core.messages import Attachment
from tests.fakes.files import make_lying_docx, make_spinning_pdf
from tests.fakes.page_server import heavy_page
from tests.rig import msg


async def read_document(data: bytes, name: str, mime: str) -> str:
    """One document through SharedReader, as a turn reads it."""

    async def fetch() -> bytes:
        return data

    doc = Attachment(kind="document", fetch=fetch, name=name, mime=mime, size=len(data))
    notes = await SharedReader(documents=DocumentLimits())(msg("read", attachments=(doc,)))
    return notes.notes[-1][:160]


async def read_pages(page: bytes, count: int) -> str:
    """The same page parsed `count` times at once (a message with that many links), cut
    and limited as PageReader does."""
    sandbox = ParseSandbox()
    args = {"content_type": "text/html", "url": "http://bench.example/", "max_chars": 200_000}
    body, _ = page_budget(page, "text/html")
    limits = {"cpu_s": PAGE_CPU_S, "memory_mb": PAGE_MEMORY_MB}
    got = await asyncio.gather(
        *(sandbox.run("page", args, body, max_reply=2_000_000, **limits) for _ in range(count)),
        return_exceptions=True,
    )
    return "; ".join(f"{len(g['text'])} chars" if isinstance(g, dict) else str(g) for g in got)


# name -> (make the input, read it); inputs are made by the parent, so the reader's peak is
# the reading alone.
CASES: dict[str, tuple[Callable[[], bytes], Callable[[bytes], Awaitable[str]]]] = {
    "docx-bomb": (
        lambda: make_lying_docx(2000),  # 2 GB inflated, headers claim 1 kB
        lambda data: read_document(data, "bomb.docx", DOCX_TYPE),
    ),
    "spinning-pdf": (
        make_spinning_pdf,
        lambda data: read_document(data, "spin.pdf", "application/pdf"),
    ),
    "three-4.9MB-pages": (heavy_page, lambda data: read_pages(data, 3)),
}


def run_one(name: str, path: str) -> dict[str, object]:
    data = Path(path).read_bytes()
    started = time.monotonic()
    note = asyncio.run(CASES[name][1](data))
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return {
        "case": name,
        "reader_peak_rss_mb": round(me.ru_maxrss / 1024),
        "reader_cpu_s": round(me.ru_utime + me.ru_stime, 2),
        "children_cpu_s": round(kids.ru_utime + kids.ru_stime, 2),
        "children_peak_rss_mb": round(kids.ru_maxrss / 1024),
        "input_kb": round(len(data) / 1024),
        "wall_s": round(time.monotonic() - started, 1),
        "note": note,
    }


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        print(json.dumps(run_one(sys.argv[2], sys.argv[3]), ensure_ascii=False))
        return
    for name in sys.argv[1:] or list(CASES):
        with tempfile.NamedTemporaryFile(suffix=".bin") as tmp:
            tmp.write(CASES[name][0]())
            tmp.flush()
            out = subprocess.run(
                [sys.executable, "-m", "bench.parse_bench", "--one", name, tmp.name],
                capture_output=True,
                text=True,
                check=True,
            )
        print(out.stdout.strip())


if __name__ == "__main__":
    main()
