"""Markdown rendered as Telegram text + entities, and split to the message limit.

What people rely on: offsets Telegram accepts for any reply (emoji, CJK, broken input),
formatting that looks like what the model wrote, and long replies cut into valid pieces
that lose nothing but the whitespace at the cuts.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from telegram import MessageEntity

from channels.formatting.markdown import new_parser
from channels.formatting.telegram import (
    Entity,
    FormattedText,
    entity_problems,
    render_telegram,
    utf16_length,
)
from channels.formatting.telegram_split import split_formatted

PARSER = new_parser()


def render(markdown: str) -> FormattedText:
    return render_telegram(markdown, PARSER)


def covered(formatted: FormattedText, entity: Entity) -> str:
    """The text an entity covers, read through UTF-16 as Telegram reads it."""
    units = formatted.text.encode("utf-16-le")
    return units[2 * entity.offset : 2 * entity.end].decode("utf-16-le")


def of_type(formatted: FormattedText, kind: str) -> list[Entity]:
    return [entity for entity in formatted.entities if entity.type == kind]


# --- rendering ---------------------------------------------------------------------


def test_cjk_and_emoji_offsets_are_utf16_units() -> None:
    formatted = render("**你好** 👍🏽 *x*")
    assert formatted.text == "你好 👍🏽 x"
    assert formatted.entities == (Entity("bold", 0, 2), Entity("italic", 8, 1))
    # 你好 and the space are 3 units, the thumbs-up and its skin tone 2 each, a space: 8
    assert covered(formatted, formatted.entities[1]) == "x"
    assert formatted.utf16_length == 9


def test_emoji_before_an_entity_shift_it_by_two_units_each() -> None:
    formatted = render("👨‍👩‍👧 🇨🇳 `code` done")
    (code,) = of_type(formatted, "code")
    family = "👨‍👩‍👧"  # three emoji joined by two zero-width joiners: 8 units
    assert code.offset == utf16_length(family + " 🇨🇳 ") == 8 + 1 + 4 + 1
    assert covered(formatted, code) == "code"


def test_nested_bold_and_italic() -> None:
    formatted = render("***both*** and **bold *inner* bold**")
    assert formatted.text == "both and bold inner bold"
    spans = {(e.type, covered(formatted, e)) for e in formatted.entities}
    assert spans == {
        ("bold", "both"),
        ("italic", "both"),
        ("bold", "bold inner bold"),
        ("italic", "inner"),
    }
    assert entity_problems(formatted) == []


def test_strikethrough_and_inline_code() -> None:
    formatted = render("~~old~~ use `pip install x`")
    assert formatted.text == "old use pip install x"
    assert [(e.type, covered(formatted, e)) for e in formatted.entities] == [
        ("strikethrough", "old"),
        ("code", "pip install x"),
    ]


def test_fenced_code_keeps_its_language_and_its_text_verbatim() -> None:
    source = "Try this:\n\n```python title=demo\ndef f(x):\n    return x ** 2  # *not* italic\n```"
    formatted = render(source)
    (pre,) = formatted.entities
    assert pre.type == "pre" and pre.language == "python"
    assert covered(formatted, pre) == "def f(x):\n    return x ** 2  # *not* italic"
    assert formatted.text.startswith("Try this:\n\n")


def test_code_without_language_and_unclosed_fence() -> None:
    formatted = render("```\nplain\n```\n\n```js\nlet a = 1;\n")
    assert [(e.type, e.language, covered(formatted, e)) for e in formatted.entities] == [
        ("pre", None, "plain"),
        ("pre", "js", "let a = 1;"),
    ]


def test_link_becomes_text_link_and_unsafe_schemes_stay_text() -> None:
    formatted = render(
        "See [the docs](https://example.com/a?b=1), [ftp](ftp://files.example.com/x), "
        "[js](javascript:alert(1)) and <https://auto.example.com>."
    )
    assert formatted.text == (
        "See the docs, ftp (ftp://files.example.com/x), js (javascript:alert(1)) "
        "and https://auto.example.com."
    )
    links = [(covered(formatted, e), e.url) for e in of_type(formatted, "text_link")]
    assert links == [
        ("the docs", "https://example.com/a?b=1"),
        ("https://auto.example.com", "https://auto.example.com"),
    ]


def test_tg_and_mailto_links_are_links() -> None:
    formatted = render("[me](tg://resolve?domain=x) [mail](mailto:a@example.com)")
    assert [e.url for e in formatted.entities] == ["tg://resolve?domain=x", "mailto:a@example.com"]


def test_image_becomes_its_text_and_url() -> None:
    formatted = render("![a cat](https://example.com/cat.png) ![](https://example.com/d.png)")
    assert formatted.text == "a cat (https://example.com/cat.png) https://example.com/d.png"
    assert formatted.entities == ()


def test_heading_becomes_a_bold_line() -> None:
    formatted = render("# Setup guide\nInstall it.\n\n## Step `one`")
    assert formatted.text == "Setup guide\n\nInstall it.\n\nStep one"
    bold = [covered(formatted, e) for e in of_type(formatted, "bold")]
    assert bold == ["Setup guide", "Step "]  # Telegram keeps no style around code
    assert [covered(formatted, e) for e in of_type(formatted, "code")] == ["one"]
    assert entity_problems(formatted) == []


def test_lists_with_bullets_numbers_and_nesting() -> None:
    formatted = render("- apples\n- pears\n  1. green\n  2. **red**\n- plums\n\n3. three\n4. four")
    assert formatted.text == (
        "• apples\n• pears\n  1. green\n  2. red\n• plums\n\n3. three\n4. four"
    )
    assert [covered(formatted, e) for e in formatted.entities] == ["red"]


def test_loose_list_items_are_separated_by_blank_lines() -> None:
    formatted = render("- one\n\n- two\n  continued\n")
    assert formatted.text == "• one\n\n• two\n  continued"


def test_code_block_in_a_list_item_is_not_indented() -> None:
    formatted = render("1. run:\n   ```sh\n   make test\n   ```\n2. done")
    assert formatted.text == "1. run:\nmake test\n2. done"
    (pre,) = formatted.entities
    assert (covered(formatted, pre), pre.language) == ("make test", "sh")


def test_blockquote_is_one_entity_and_a_nested_quote_joins_it() -> None:
    formatted = render("> said **this**\n> > and that\n\nafter")
    assert formatted.text == "said this\n\nand that\n\nafter"
    quotes = [covered(formatted, e) for e in of_type(formatted, "blockquote")]
    assert quotes == ["said this\n\nand that"]
    assert entity_problems(formatted) == []


def test_table_is_an_aligned_monospace_block() -> None:
    formatted = render(
        "| name | 城市 | n |\n|:--|:--:|--:|\n| Ann | 北京 | 7 |\n| Bob | Rome | 12 |"
    )
    (pre,) = formatted.entities
    assert pre.type == "pre" and pre.language is None
    assert formatted.text == (
        "name | 城市 |  n\n-----+------+---\nAnn  | 北京 |  7\nBob  | Rome | 12"
    )
    assert covered(formatted, pre) == formatted.text


def test_horizontal_rule_and_raw_html_as_text() -> None:
    formatted = render("above\n\n---\n\n<b>not bold</b> & <script>x</script>")
    assert formatted.text == "above\n\n———\n\n<b>not bold</b> & <script>x</script>"
    assert formatted.entities == ()


def test_code_inside_a_link_and_styles_around_code_follow_telegram_rules() -> None:
    formatted = render("[`api`](https://x.example) **see `f()` now** *`all code`*")
    assert formatted.text == "api see f() now all code"
    kinds = [(e.type, covered(formatted, e)) for e in formatted.entities]
    assert kinds == [
        ("text_link", "api"),
        ("bold", "see "),
        ("code", "f()"),
        ("bold", " now"),
        ("code", "all code"),
    ]
    assert entity_problems(formatted) == []


def test_to_bot_api_gives_dicts_python_telegram_bot_accepts() -> None:
    formatted = render("**b** [l](https://x.example)\n\n```py\nx\n```")
    data = formatted.to_bot_api()
    assert data[0] == {"type": "bold", "offset": 0, "length": 1}
    assert data[1] == {"type": "text_link", "offset": 2, "length": 1, "url": "https://x.example"}
    entities = [MessageEntity(**item) for item in data]
    assert [e.type for e in entities] == ["bold", "text_link", "pre"]
    assert entities[2].language == "py"


def test_broken_input_renders() -> None:
    lone = "bad \ud83d decode \udc00 **bold**"
    formatted = render(lone)
    assert formatted.text == "bad \ufffd decode \ufffd bold"
    formatted.text.encode("utf-8")
    assert "\x00" not in render("nul \x00 here").text
    for source in ("*" * 5000 + "x" + "*" * 5000, ">" * 3000 + " deep", "- " * 3000 + "x"):
        assert entity_problems(render(source)) == []
    assert render(">" * 50 + " deep").text == "deep"
    assert render("- " * 30 + "x").text.endswith("• x")


def test_a_100_kb_reply_renders_with_valid_entities() -> None:
    chunk = "## Part\n\n**bold 你好 👍🏽** `code` [l](https://e.x) > q\n\n```py\nx = 1\n"
    formatted = render(chunk * (100_000 // len(chunk)))
    assert entity_problems(formatted) == []


def test_entity_problems_reports_what_telegram_refuses() -> None:
    text = "a👍b"  # the thumbs-up is units 1-2
    assert entity_problems(FormattedText(text, (Entity("bold", 2, 1),)))  # mid-pair
    assert entity_problems(FormattedText(text, (Entity("bold", 0, 9),)))  # past the end
    assert entity_problems(FormattedText(text, (Entity("bold", 0, 0),)))  # empty
    partial = (Entity("bold", 0, 3), Entity("italic", 1, 3))
    assert entity_problems(FormattedText(text, partial))
    in_code = (Entity("code", 0, 4), Entity("bold", 0, 1))
    assert entity_problems(FormattedText(text, in_code))
    assert entity_problems(FormattedText(" \n ", ()))
    assert entity_problems(FormattedText(text, (Entity("bold", 0, 3),))) == []


# --- properties --------------------------------------------------------------------

FRAGMENTS = [
    "**", "*", "_", "__", "~~", "`", "```py\n", "```\n", "\n", "\n\n", "# ", "## ", "> ",
    "> > ", "- ", "  - ", "1. ", "| a | b |\n|---|:-:|\n| 1 | 2 |\n", "[", "](https://x.y/z)",
    "](ftp://q)", "](", ")", "<b>", "&amp;", "\\", "---\n", "    ", " ", ". ", "。", "word",
    "你好世界", "👍🏽", "👨‍👩‍👧", "🇨🇳🇯🇵", "e\u0301", "\x00", "\ud800", "\r\n", "![i](http://p.q/r.png)",
]  # fmt: skip
MARKDOWN = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=60).map(
    "".join
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=MARKDOWN)
def test_any_input_renders_with_valid_entities(source: str) -> None:
    formatted = render(source)
    problems = entity_problems(formatted)
    if not formatted.text.strip():
        assert problems == ["text is empty"]
        assert formatted.entities == ()
    else:
        assert problems == []
    assert formatted.text == formatted.text.strip()


# --- splitting ---------------------------------------------------------------------


def reassemble(original: FormattedText, pieces: list[FormattedText]) -> None:
    """Assert the pieces are the original text minus whitespace at the cuts, and each
    piece's entities are exactly the original entities clipped to that piece."""
    text = original.text
    position = 0
    for piece in pieces:
        start = position
        while not text.startswith(piece.text, start):
            assert text[start].isspace(), "only whitespace may be dropped between pieces"
            start += 1
        base = utf16_length(text[:start])
        expected = set()
        for entity in original.entities:
            low, high = max(entity.offset, base), min(entity.end, base + piece.utf16_length)
            if high > low:
                expected.add(
                    Entity(entity.type, low - base, high - low, entity.url, entity.language)
                )
        assert set(piece.entities) == expected
        assert len(piece.entities) == len(expected)
        position = start + len(piece.text)
    assert text[position:].strip() == ""


def test_a_6000_character_answer_splits_with_its_code_block_on_both_sides() -> None:
    # the paragraph before the code is too short to end a piece (under a third of the
    # limit), so the cut falls on a line inside the code block
    prose = "This sentence is filler for a long answer, 中文也有。 " * 12
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(130))
    source = f"## Answer\n\n{prose}\n\n```python\n{code}\n```\n\nThat is **all**."
    formatted = render(source)
    assert 5500 < formatted.utf16_length < 7000
    pieces = split_formatted(formatted)
    assert len(pieces) == 2
    assert all(piece.utf16_length <= 4096 for piece in pieces)
    first_pre, second_pre = (of_type(piece, "pre") for piece in pieces)
    assert [e.language for e in first_pre + second_pre] == ["python", "python"]
    assert second_pre[0].offset == 0  # the second piece opens inside the code block
    assert pieces[1].text.startswith("    value_")  # the cut was at a line, indentation kept
    reassemble(formatted, pieces)
    assert all(entity_problems(piece) == [] for piece in pieces)


def test_split_prefers_paragraphs_then_lines_then_sentences_then_words() -> None:
    paragraphs = FormattedText("aaaa bbbb.\ncccc dddd\n\neeee")
    assert [p.text for p in split_formatted(paragraphs, 22)] == ["aaaa bbbb.\ncccc dddd", "eeee"]
    lines = FormattedText("aaaa bbbb. cccc\ndddd eeee")
    assert [p.text for p in split_formatted(lines, 18)] == ["aaaa bbbb. cccc", "dddd eeee"]
    sentences = FormattedText("aaaa bbbb. cccc dddd")
    assert [p.text for p in split_formatted(sentences, 15)] == ["aaaa bbbb.", "cccc dddd"]
    cjk = FormattedText("你好世界。再见朋友")
    assert [p.text for p in split_formatted(cjk, 7)] == ["你好世界。", "再见朋友"]
    words = FormattedText("aaaa bbbb cccc")
    assert [p.text for p in split_formatted(words, 10)] == ["aaaa bbbb", "cccc"]


def test_a_bold_run_across_a_cut_becomes_one_entity_per_piece() -> None:
    formatted = render("**" + "word " * 10 + "end**")
    pieces = split_formatted(formatted, 20)
    assert all(len(of_type(piece, "bold")) == 1 for piece in pieces)
    reassemble(formatted, pieces)


def test_hard_cuts_keep_surrogate_pairs_and_emoji_sequences_whole() -> None:
    family = "👨‍👩‍👧"
    formatted = FormattedText(family * 10)
    pieces = split_formatted(formatted, 13)
    assert all(piece.text.count(family) * len(family) == len(piece.text) for piece in pieces)
    assert "".join(p.text for p in pieces) == formatted.text
    emoji = FormattedText("👍" * 9)
    assert [p.text for p in split_formatted(emoji, 5)] == ["👍👍", "👍👍", "👍👍", "👍👍", "👍"]


def test_short_and_blank_texts() -> None:
    assert split_formatted(FormattedText("hi")) == [FormattedText("hi")]
    assert split_formatted(FormattedText("")) == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=MARKDOWN, limit=st.integers(min_value=2, max_value=120))
def test_split_pieces_fit_stay_valid_and_give_back_the_text(source: str, limit: int) -> None:
    formatted = render(source)
    pieces = split_formatted(formatted, limit)
    for piece in pieces:
        assert 0 < piece.utf16_length <= limit
        assert piece.text.strip()
        assert entity_problems(piece) == []
    reassemble(formatted, pieces)


def test_a_paragraph_break_at_the_edge_of_the_limit_is_dropped_whole() -> None:
    formatted = FormattedText("aaaa bbbb\n\n\ncccc")
    assert [p.text for p in split_formatted(formatted, 9)] == ["aaaa bbbb", "cccc"]
