"""A growing answer's preview renders without literal Markdown marks."""

from __future__ import annotations

import pytest

from channels.formatting.growing import close_open_marks
from channels.formatting.telegram import render_telegram


@pytest.mark.parametrize(
    ("growing", "shown", "entity"),
    [
        ("Noted, you like **green", "Noted, you like green", "bold"),
        ("Run `pip ins", "Run pip ins", "code"),
        ("It was ~~wrong", "It was wrong", "strikethrough"),
        ("Noted, you like **green** tea", "Noted, you like green tea", "bold"),
        ("Noted, you like **", "Noted, you like", None),
        ("Use **`make te", "Use make te", "code"),
    ],
)
def test_a_preview_shows_no_unclosed_marks(growing: str, shown: str, entity: str | None) -> None:
    rendered = render_telegram(close_open_marks(growing))
    assert rendered.text == shown
    kinds = {e.to_bot_api()["type"] for e in rendered.entities}
    assert (entity in kinds) if entity else not kinds


def test_text_inside_an_open_code_block_is_left_alone() -> None:
    growing = "Here:\n```python\nprint('**not bold')"
    assert close_open_marks(growing) == growing
    assert "**not bold" in render_telegram(close_open_marks(growing)).text


def test_marks_after_a_closed_code_block_are_closed() -> None:
    growing = "```\ncode **\n```\nand **bold"
    assert render_telegram(close_open_marks(growing)).text.endswith("and bold")


def test_a_finished_answer_is_unchanged() -> None:
    final = "A **bold** and `code` and ~~gone~~ answer."
    assert render_telegram(close_open_marks(final)).text == render_telegram(final).text
