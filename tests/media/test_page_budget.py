"""A big shared page costs a bounded part of it (issue 44 item 5): scripts, styles and
comments are left out and at most PAGE_PARSE_BYTES of the rest is parsed, in a child with
the page's own CPU and memory limits; the model is told the page was read in part.
"""

from __future__ import annotations

import resource

from core.media.fetch import DownloadPolicy, SafeDownloader
from core.media.links import PAGE_CPU_S, LinkReader, Page, PageReader, render_page
from core.media.page_text import PAGE_PARSE_BYTES, page_budget
from core.media.sandbox import ParseSandbox
from tests.fakes.dns import MapResolver
from tests.fakes.page_server import PageServer

MB = 1024 * 1024
NEWS = "news.example"


def test_scripts_styles_and_comments_are_left_out_of_a_big_page() -> None:
    page = (
        b"<html><head><title>T</title><script>var a = '<p>not text</p>';</script>"
        b"<STYLE>p { color: red }</style><!-- <p>a comment</p> --></head><body>"
        b"<styled-box>kept</styled-box><p>Hello</p><scripts>kept too</scripts>"
        b"<script src=x>" + b"z" * 100
    )
    kept, cut = page_budget(page, "text/html", limit=len(page) - 1)
    assert kept == (
        b"<html><head><title>T</title></head><body>"
        b"<styled-box>kept</styled-box><p>Hello</p><scripts>kept too</scripts>"
    )
    assert not cut  # all that is left after the unclosed script is the script


def test_the_limit_cuts_and_says_so() -> None:
    page = b"<p>one</p><script>x</script><p>two</p>"
    assert page_budget(page, "text/html", limit=12) == (b"<p>one</p><p", True)
    assert page_budget(page, "text/html", limit=len(page)) == (page, False)  # small: as is
    assert page_budget(b"abcdef", "text/plain", limit=3) == (b"abc", True)


def test_a_page_of_nothing_but_blocks_costs_the_daemon_little() -> None:
    page = b"<!--x--><p>a</p>" * 400_000  # 6.4 MB, 400,000 blocks
    before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    kept, cut = page_budget(page, "text/html")
    assert len(kept) == PAGE_PARSE_BYTES and cut
    assert resource.getrusage(resource.RUSAGE_SELF).ru_utime - before < 0.5


async def test_a_4_9_mb_page_is_read_in_part_within_the_page_limits() -> None:
    """Before: the whole page went to trafilatura (about 18 CPU-s and 350 MB)."""
    policy = DownloadPolicy(max_bytes=8 * MB, timeout_s=10.0, allow_private_hosts=(NEWS,))
    downloader = SafeDownloader(policy, resolver=MapResolver({NEWS: "127.0.0.1"}))
    reader = PageReader(downloader, sandbox=ParseSandbox())
    links = LinkReader(reader, max_links=3, max_chars=4000)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    async with PageServer() as pages:
        notes = await links.notes([f"see http://{NEWS}:{pages.port}/heavy"])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    (note,) = notes.notes
    assert note.startswith("(Link 1: Minutes — The committee discussed the harbour budget")
    assert "(only the first 512 KiB of the page's 4.9 MB were read)" in note
    assert spent < PAGE_CPU_S, f"the page child spent {spent:.1f} CPU-seconds"


def test_the_read_tool_says_a_page_was_read_in_part() -> None:
    page = Page("http://x.example/", "Minutes", "text", partly=(PAGE_PARSE_BYTES, 5 * MB))
    assert render_page(page, 100).endswith(
        "text\n(only the first 512 KiB of the page's 5.0 MB were read)"
    )
    assert "only the first" not in render_page(Page("http://x.example/", "M", "text"), 100)
