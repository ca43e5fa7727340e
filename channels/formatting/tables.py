"""Markdown tables as aligned text rows, for a monospace block or a plain-text chat.

Why by display width: a CJK character or most emoji fill two columns in a monospace
font, so counting characters would push every row with Chinese text out of line.
"""

from __future__ import annotations

import unicodedata

LEFT = "left"
RIGHT = "right"
CENTER = "center"

_COLUMN_GAP = " | "
_RULE_GAP = "-+-"


def display_width(text: str) -> int:
    """Columns `text` takes in a monospace font: wide/fullwidth count two; marks,
    variation selectors, skin tones and whatever a zero-width joiner glues on, zero."""
    width = 0
    joined = False
    for char in text:
        glued, joined = joined, char == "\u200d"
        if glued or _zero_width(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _zero_width(char: str) -> bool:
    return (
        unicodedata.category(char) in ("Mn", "Me", "Cf")
        or "\ufe00" <= char <= "\ufe0f"
        or "\U0001f3fb" <= char <= "\U0001f3ff"
    )


def layout_table(rows: list[list[str]], aligns: list[str | None]) -> str:
    """Lines of `rows` (the first is the header) with padded columns and a rule under
    the header. Missing cells count as empty; line breaks inside a cell become spaces."""
    if not rows:
        return ""
    columns = max(len(row) for row in rows)
    cells = [[_one_line(cell) for cell in row] + [""] * (columns - len(row)) for row in rows]
    widths = [max(1, *(display_width(row[col]) for row in cells)) for col in range(columns)]
    aligns = list(aligns) + [None] * (columns - len(aligns))
    lines = [_row_line(cells[0], widths, aligns)]
    lines.append(_RULE_GAP.join("-" * width for width in widths))
    lines.extend(_row_line(row, widths, aligns) for row in cells[1:])
    return "\n".join(lines)


def _row_line(row: list[str], widths: list[int], aligns: list[str | None]) -> str:
    return _COLUMN_GAP.join(
        _pad(cell, width, align) for cell, width, align in zip(row, widths, aligns, strict=True)
    ).rstrip()


def _pad(cell: str, width: int, align: str | None) -> str:
    room = width - display_width(cell)
    if align == RIGHT:
        return " " * room + cell
    if align == CENTER:
        return " " * (room // 2) + cell + " " * (room - room // 2)
    return cell + " " * room


def _one_line(cell: str) -> str:
    return " ".join(cell.split("\n")).strip()
