"""Markdown rendered as plain text for QQ: readable, with no Markdown symbols left.

What people rely on: a QQ user never sees `**`, `#`, fences or `[text](url)`, code comes
through exactly as written, and no reply (however broken) fails to render.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.formatting.markdown import new_parser
from channels.formatting.plain import render_plain
from channels.formatting.tables import display_width

PARSER = new_parser()


def plain(markdown: str) -> str:
    return render_plain(markdown, PARSER)


def test_emphasis_marks_are_gone_and_cjk_emoji_kept() -> None:
    assert plain("**你好** 👍🏽 *x*") == "你好 👍🏽 x"
    assert plain("***both*** and __bold _inner_ bold__ ~~old~~") == ("both and bold inner bold old")


def test_inline_code_and_code_blocks_are_verbatim() -> None:
    source = "Run `pip install **x**`:\n\n```python\ndef f(x):\n    return x ** 2  # *no*\n```\nend"
    assert plain(source) == (
        "Run pip install **x**:\n\ndef f(x):\n    return x ** 2  # *no*\n\nend"
    )


def test_code_block_in_a_list_is_not_indented() -> None:
    assert plain("1. run:\n   ```sh\n   make test\n   ```\n2. done") == (
        "1. run:\nmake test\n2. done"
    )


def test_links_read_as_text_and_url() -> None:
    source = (
        "See [the docs](https://example.com/a?b=1), <https://auto.example.com>, "
        "[https://same.example](https://same.example) and ![a cat](https://e.x/cat.png)."
    )
    assert plain(source) == (
        "See the docs (https://example.com/a?b=1), https://auto.example.com, "
        "https://same.example and a cat (https://e.x/cat.png)."
    )


def test_email_autolinks_and_empty_destinations_show_no_extra_url() -> None:
    assert plain("<ann@example.com> [x](<>)") == "ann@example.com x"


def test_link_url_shows_readable_characters() -> None:
    assert plain("[维基](https://zh.wikipedia.org/wiki/你好)") == (
        "维基 (https://zh.wikipedia.org/wiki/你好)"
    )
    assert plain("[x](<https://e.x/a b>)") == "x (https://e.x/a%20b)"  # a space would break it


def test_headings_are_their_text_on_their_own_line() -> None:
    assert plain("# Setup guide\nInstall it.\n\n## Step `one`") == (
        "Setup guide\n\nInstall it.\n\nStep one"
    )


def test_lists_with_bullets_numbers_and_nesting() -> None:
    source = "- apples\n- pears\n  1. green\n  2. **red**\n- plums\n\n3. three\n4. four"
    assert plain(source) == "• apples\n• pears\n  1. green\n  2. red\n• plums\n\n3. three\n4. four"


def test_blockquotes_prefix_every_line() -> None:
    assert plain("> said **this**\n> > and that\n>\n> ```\n> code\n> ```\n\nafter") == (
        "> said this\n>\n> > and that\n>\n> code\n\nafter"
    )


def test_table_is_aligned_rows() -> None:
    source = "| name | 城市 | n |\n|:--|:--:|--:|\n| Ann | 北京 | 7 |\n"
    source += "| [Bob](https://b.x) | Rome | 12 |"
    assert plain(source) == (
        "name              | 城市 |  n\n"
        "------------------+------+---\n"
        "Ann               | 北京 |  7\n"
        "Bob (https://b.x) | Rome | 12"
    )


def test_table_columns_count_display_width_of_cjk_and_emoji() -> None:
    widths = {"abc": 3, "你好": 4, "👍🏽": 2, "👨‍👩‍👧": 2, "🇨🇳": 2, "e\u0301": 1}
    assert {text: display_width(text) for text in widths} == widths
    assert plain("| x | y |\n|---|---|\n| 👍🏽 | 1 |\n| 你好 | 2 |") == (
        "x    | y\n-----+--\n👍🏽   | 1\n你好 | 2"
    )


def test_rule_html_and_escapes() -> None:
    assert plain("above\n\n---\n\n<b>kept</b> \\*literal\\* &amp;") == (
        "above\n\n———\n\n<b>kept</b> *literal* &"
    )


def test_broken_input_renders() -> None:
    assert plain("bad \ud83d decode **x**") == "bad \ufffd decode x"
    assert plain("```py\nunclosed fence\n  indented") == "unclosed fence\n  indented"
    assert plain("nul\x00") == "nul\ufffd"
    assert plain(">" * 3000 + " deep")  # past the nesting limit the source is shown
    chunk = "## Part\n\n**bold 你好 👍🏽** `code` [l](https://e.x)\n\n```py\nx = 1\n```\n"
    long = plain(chunk * (100_000 // len(chunk)))
    assert "**" not in long and "```" not in long and "](" not in long


FRAGMENTS = [
    "**", "*", "_", "~~", "`", "```py\n", "```\n", "\n", "\n\n", "# ", "> ", "- ", "1. ",
    "| a | b |\n|---|---|\n| 1 | 2 |\n", "[", "](https://x.y/z)", "](", ")", "<i>", "&lt;",
    "\\", "word", "你好", "👍🏽", "👨‍👩‍👧", "\x00", "\udfff",
]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=60).map(
        "".join
    )
)
def test_any_input_renders_as_sendable_text(source: str) -> None:
    text = plain(source)
    text.encode("utf-8")  # no lone surrogates: a send could not encode them
    assert text == text.strip()
    assert bool(text) == bool(source.strip())
