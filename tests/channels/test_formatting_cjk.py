"""Emphasis in CJK text: what a Chinese or Japanese reader of a QQ or Telegram reply sees.

What people rely on: bold the model wrote around full-width punctuation (`**注意：**这是`,
the way models write Chinese) shows as bold, not as literal `**`; text without CJK parses
exactly as CommonMark says.
"""

from __future__ import annotations

import random

from markdown_it import MarkdownIt

from channels.formatting.cjk import is_cjk
from channels.formatting.markdown import new_parser
from channels.formatting.plain import render_plain
from channels.formatting.telegram import render_telegram

PARSER = new_parser()


def plain(markdown: str) -> str:
    return render_plain(markdown, PARSER)


def test_bold_ending_in_full_width_punctuation_before_a_word() -> None:
    assert plain("**注意：**这是重点") == "注意：这是重点"
    assert plain("**步骤1：**安装依赖，然后**运行！**就好") == "步骤1：安装依赖，然后运行！就好"
    assert plain("这是**“引用”**的内容") == "这是“引用”的内容"
    assert plain("「**強調**」です。*斜体。*后面") == "「強調」です。斜体。后面"
    assert plain("~~删除。~~后") == "删除。后"
    assert plain("한국어**강조：**문장") == "한국어강조：문장"


def test_cjk_bold_becomes_a_telegram_entity() -> None:
    rendered = render_telegram("**注意：**这是重点")
    assert rendered.text == "注意：这是重点"
    [entity] = rendered.entities
    assert (entity.type, entity.offset, entity.length) == ("bold", 0, 3)


def test_underscores_inside_cjk_words_stay_text() -> None:
    assert plain("変数_名前_です and snake_case_name") == "変数_名前_です and snake_case_name"


def test_is_cjk() -> None:
    assert all(is_cjk(c) for c in "中文かなカナ한글：，。「」（）")
    assert not any(is_cjk(c) for c in "aé:,.👍 \u00a0—")


def test_text_without_cjk_parses_as_commonmark() -> None:
    standard = MarkdownIt("commonmark", {"html": False, "maxNesting": 100})
    standard.enable(["table", "strikethrough"])
    alphabet = [*"ab  *_~~**__.,:;!?\"'()[]-\n", "é", "👍", "\u00a0", "—"]
    rng = random.Random(7)
    for _ in range(3000):
        source = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        assert PARSER.render(source) == standard.render(source), source
