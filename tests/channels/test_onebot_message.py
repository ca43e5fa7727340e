"""OneBot v11 message bodies: CQ strings, segment arrays, and what the channel reads."""

from __future__ import annotations

import logging

import pytest

from channels.onebot.message import (
    FileSegment,
    cq_unescape,
    interpret,
    normalize_message,
    parse_cq_string,
    reply_segment,
    text_segment,
)
from tests.fakes.onebot_impl import cq_code, cq_text


def test_cq_string_with_codes_and_escapes() -> None:
    raw = "hi " + cq_code("at", qq=10001) + " see " + cq_text("[x] & y") + cq_code("face", id=178)
    assert parse_cq_string(raw) == [
        {"type": "text", "data": {"text": "hi "}},
        {"type": "at", "data": {"qq": "10001"}},
        {"type": "text", "data": {"text": " see [x] & y"}},
        {"type": "face", "data": {"id": "178"}},
    ]


def test_cq_param_values_unescape_commas_and_keep_equals() -> None:
    raw = cq_code("share", title="a,b=c [d]", url="http://x/?a=1&b=2")
    assert parse_cq_string(raw) == [
        {"type": "share", "data": {"title": "a,b=c [d]", "url": "http://x/?a=1&b=2"}}
    ]


def test_unescape_order_keeps_literal_entities() -> None:
    # the user literally typed "&#91;": escaped on the wire as "&amp;#91;"
    assert cq_unescape("&amp;#91;") == "&#91;"
    assert parse_cq_string(cq_text("&#91;not a bracket")) == [
        {"type": "text", "data": {"text": "&#91;not a bracket"}}
    ]


def test_code_without_params_and_unterminated_code() -> None:
    assert parse_cq_string("[CQ:shake]") == [{"type": "shake", "data": {}}]
    assert parse_cq_string("a [CQ:at,qq=1") == [{"type": "text", "data": {"text": "a [CQ:at,qq=1"}}]


def test_array_form_is_normalized_and_bad_segments_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    raw = [
        {"type": "text", "data": {"text": "x"}},
        {"type": "at", "data": {"qq": 10001}},  # some implementations send numbers
        "garbage",
        {"data": {}},
        {"type": "image", "data": "not an object"},
        {"type": "shake"},
    ]
    assert normalize_message(raw) == [
        {"type": "text", "data": {"text": "x"}},
        {"type": "at", "data": {"qq": "10001"}},
        {"type": "shake", "data": {}},
    ]
    assert "malformed message segment" in caplog.text


def test_non_message_body_gives_nothing() -> None:
    assert normalize_message(None) == []
    assert normalize_message(42) == []


def test_mention_of_self_is_flagged_and_removed() -> None:
    parsed = interpret(parse_cq_string(cq_code("at", qq=10001) + " /help"), "10001")
    assert parsed.mentions_self and parsed.text == "/help"


def test_at_all_is_not_a_mention() -> None:
    parsed = interpret(parse_cq_string(cq_code("at", qq="all") + " meeting"), "10001")
    assert not parsed.mentions_self
    assert parsed.mentions_all
    assert parsed.text == "@all meeting"


def test_other_mentions_render_with_name_or_number() -> None:
    segs = [
        {"type": "at", "data": {"qq": "222", "name": "bob"}},
        {"type": "text", "data": {"text": " and "}},
        {"type": "at", "data": {"qq": "333"}},
    ]
    assert interpret(segs, "10001").text == "@bob and @333"


def test_reply_and_images_extracted() -> None:
    segs = normalize_message(
        [
            {"type": "reply", "data": {"id": "-12345"}},
            {"type": "image", "data": {"file": "abc.jpg", "url": "https://m.qpic.cn/abc"}},
            {"type": "image", "data": {"file": "https://cdn.example/p.png"}},
            {"type": "image", "data": {"file": "file:///tmp/local.png"}},
            {"type": "text", "data": {"text": "look"}},
        ]
    )
    parsed = interpret(segs, "10001")
    assert parsed.reply_to == "-12345"
    assert parsed.images == (
        FileSegment("image", "abc.jpg", url="https://m.qpic.cn/abc"),
        FileSegment("image", "https://cdn.example/p.png", url="https://cdn.example/p.png"),
    )
    assert parsed.text == "[image]look"  # the unreachable local file is only mentioned


def test_records_and_files_become_fetchable_segments() -> None:
    parsed = interpret(
        [
            {"type": "record", "data": {"file": "a.amr", "url": "http://127.0.0.1/a.amr"}},
            {"type": "file", "data": {"file": "r.pdf", "file_id": "f-1", "file_size": "2048"}},
        ],
        "10001",
    )
    assert parsed.text == ""  # no placeholders: the reader writes their notes
    assert parsed.files == (
        FileSegment("voice", "a.amr", "a.amr", "", "http://127.0.0.1/a.amr", None),
        FileSegment("document", "r.pdf", "r.pdf", "f-1", "", 2048),
    )


@pytest.mark.parametrize(
    ("segment", "shown"),
    [
        ({"type": "face", "data": {"id": "178"}}, "[face]"),
        ({"type": "record", "data": {}}, "[voice message]"),  # nothing to fetch it by
        ({"type": "share", "data": {"url": "http://x", "title": "T"}}, "[link: T http://x]"),
        ({"type": "file", "data": {"name": "report.pdf"}}, "[file: report.pdf]"),
        ({"type": "brand_new_thing", "data": {}}, "[brand_new_thing]"),
    ],
)
def test_placeholders(segment: dict[str, object], shown: str) -> None:
    assert interpret(normalize_message([segment]), "1").text == shown


def test_outgoing_builders_are_plain_segments() -> None:
    assert text_segment("[CQ:at,qq=all]") == {"type": "text", "data": {"text": "[CQ:at,qq=all]"}}
    assert reply_segment("77") == {"type": "reply", "data": {"id": "77"}}
