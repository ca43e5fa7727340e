"""Pure parts the Telegram channel is built from: splitting, malformed-update filtering."""

from __future__ import annotations

import logging

from channels.telegram.outbound import split_for_telegram
from channels.telegram.polling import sanitise_updates

# -- splitting -----------------------------------------------------------------------


def test_split_counts_utf16_units_for_emoji() -> None:
    text = "😀" * 3000  # 3000 characters but 6000 UTF-16 units: over Telegram's limit
    pieces = split_for_telegram(text)
    assert len(pieces) >= 2 and "".join(pieces) == text
    assert all(len(p.encode("utf-16-le")) // 2 <= 4096 for p in pieces)
    assert split_for_telegram("short") == ["short"]
    assert split_for_telegram("   ") == []


# -- malformed updates ---------------------------------------------------------------


def test_sanitise_updates_keeps_offsets_moving(caplog) -> None:
    caplog.set_level(logging.WARNING)
    good = {
        "update_id": 3,
        "message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}, "text": "hi"},
    }
    result = sanitise_updates(
        [
            {"update_id": 1, "message": {"message_id": 1}},
            "garbage",
            {"update_id": "2"},
            good,
        ]
    )
    assert result == [{"update_id": 1}, good]
    assert "ignored malformed update 1" in caplog.text
    assert caplog.text.count("without an update_id") == 2
