"""The child process that parses one hostile file or page: `python -m core.media.parse_worker`.

Why a child: pypdf, python-docx and trafilatura are pure-Python parsers fed bytes chosen
by strangers; a crafted file can burn minutes of CPU or gigabytes of memory, and a thread
cannot be stopped. Here the kernel enforces the limits (set first, before a byte of the
input is read) and the parent kills the process at its timeout.

Protocol (stdin -> stdout): one JSON header line `{"job": ..., "args": {...}}`, then the
raw bytes until EOF; the answer is one JSON object, `{"result": {...}}` or
`{"refused": "short reason"}`. JSON, never pickle: a parser exploited by its input must
not be able to run code in the daemon through its answer.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

Job = Callable[[dict[str, Any], bytes], dict[str, Any]]


def _document(args: dict[str, Any], data: bytes) -> dict[str, Any]:
    from core.media.documents import extract_document

    doc = extract_document(
        data,
        str(args["name"]),
        args.get("mime"),
        max_pages=int(args["max_pages"]),
        max_chars=int(args["max_chars"]),
    )
    return asdict(doc)


def _page(args: dict[str, Any], data: bytes) -> dict[str, Any]:
    from core.media.page_text import extract_page

    title, text = extract_page(data, args.get("content_type"), str(args["url"]))
    return {"title": title[:1000], "text": text[: int(args["max_chars"])]}


def _pdf_pages(args: dict[str, Any], data: bytes) -> dict[str, Any]:
    """A PDF's pages with their numbers, for the knowledge base's `p. N` citations."""
    from core.media.documents import BadDocument, pdf_pages

    try:
        pages = pdf_pages(data, int(args["max_pages"]))
    except ValueError as exc:  # pypdf's own, besides BadDocument
        raise BadDocument(str(exc)) from None
    return {"pages": [{"text": p.text, "locator": p.locator} for p in pages]}


JOBS: dict[str, Job] = {"document": _document, "page": _page, "pdf_pages": _pdf_pages}


def limit_self(cpu_s: int, memory_mb: int) -> None:
    """CPU seconds (SIGXCPU, then SIGKILL a second later), address space, no files written,
    no core dumps; and die with the parent (Linux), so no parse outlives the daemon. A
    limit the platform refuses is skipped: the parent's wall-clock kill still holds."""
    memory = memory_mb * 1024 * 1024
    for kind, value in (
        (resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (0, 0)),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        try:
            resource.setrlimit(kind, value)
        except (ValueError, OSError):
            pass
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


OUT_OF_MEMORY = "it needs more memory to read than allowed"


def answer(job: str, args: dict[str, Any], data: bytes) -> dict[str, Any]:
    """The JSON answer for one job; every failure is a short reason, never a traceback."""
    from core.media.documents import BadDocument

    run = JOBS.get(job)
    if run is None:
        return {"refused": f"unknown job {job!r}"}
    try:
        return {"result": run(args, data)}
    except MemoryError:
        return {"refused": OUT_OF_MEMORY}
    except RecursionError:
        return {"refused": "it is too deeply nested to read"}
    except Exception as exc:  # BadDocument, or a parser bug on a hostile input
        if _hit_memory_limit():  # lxml and friends turn a failed malloc into other errors
            return {"refused": OUT_OF_MEMORY}
        if isinstance(exc, BadDocument):
            return {"refused": str(exc)}
        return {"refused": f"the parser failed ({type(exc).__name__})"}


def _hit_memory_limit() -> bool:
    """Whether the address space came within 5% of RLIMIT_AS (VmPeak: the peak we reached)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024 > limit * 0.95
    except OSError:
        pass
    return False


def main() -> None:
    cpu_s, memory_mb, parent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    limit_self(cpu_s, memory_mb)
    if os.getppid() != parent:  # the daemon died before the death signal was armed
        sys.exit(0)
    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())
    data = stdin.read()
    reply = answer(str(header["job"]), dict(header["args"]), data)
    sys.stdout.buffer.write(json.dumps(reply, ensure_ascii=False).encode())
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
