"""Images -> image_url parts: content checks, size cap, bounded content-hash cache."""

from __future__ import annotations

import base64
import logging
import struct
import zlib
from pathlib import Path

import pytest

from core.media.data_url import ImageEncoder, sniff_image_mime


def png_bytes(width: int = 1, height: int = 1, seed: int = 0) -> bytes:
    """A real, decodable PNG (grayscale), built by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes([(seed + x) % 256 for x in range(width)]) for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00"
    b"\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
WEBP = (
    b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00"
    b"\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"
)


@pytest.mark.parametrize(
    ("data", "mime"),
    [(png_bytes(), "image/png"), (GIF, "image/gif"), (JPEG, "image/jpeg"), (WEBP, "image/webp")],
)
def test_supported_formats_by_content(tmp_path: Path, data: bytes, mime: str) -> None:
    path = tmp_path / "pic.bin"  # the name says nothing: content decides
    path.write_bytes(data)
    part = ImageEncoder().image_part(path)
    assert part is not None and part["type"] == "image_url"
    url = part["image_url"]["url"]
    prefix = f"data:{mime};base64,"
    assert url.startswith(prefix)
    assert base64.b64decode(url[len(prefix) :]) == data


def test_non_image_with_image_name_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "fake.png"
    path.write_text("<html>not an image</html>", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="core.media.data_url"):
        assert ImageEncoder().image_part(path) is None
    assert "fake.png" in caplog.text and "not a JPEG" in caplog.text


def test_missing_file_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="core.media.data_url"):
        assert ImageEncoder().image_parts([tmp_path / "nope.jpg"]) == []
    assert "nope.jpg" in caplog.text and "not found" in caplog.text


def test_too_big_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "big.png"
    path.write_bytes(png_bytes(64, 64))
    encoder = ImageEncoder(max_bytes=50)
    with caplog.at_level(logging.WARNING, logger="core.media.data_url"):
        assert encoder.image_part(path) is None
        assert encoder.image_part(path.read_bytes()) is None
    assert caplog.text.count("skipped") == 2


def test_directory_is_skipped(tmp_path: Path) -> None:
    assert ImageEncoder().image_part(tmp_path) is None


def test_mixed_list_keeps_order_and_drops_bad(tmp_path: Path) -> None:
    (tmp_path / "a.gif").write_bytes(GIF)
    (tmp_path / "b.txt").write_text("text", encoding="utf-8")
    parts = ImageEncoder().image_parts([tmp_path / "a.gif", tmp_path / "b.txt", JPEG])
    assert [p["image_url"]["url"][:15] for p in parts] == ["data:image/gif;", "data:image/jpeg"]


def test_identical_content_encoded_once(tmp_path: Path) -> None:
    data = png_bytes(8, 8)
    (tmp_path / "one.png").write_bytes(data)
    (tmp_path / "two.png").write_bytes(data)
    encoder = ImageEncoder()
    first = encoder.image_part(tmp_path / "one.png")
    second = encoder.image_part(tmp_path / "two.png")
    assert first == second
    assert (encoder.misses, encoder.hits, len(encoder)) == (1, 1, 1)


def test_cache_is_bounded_in_entries_and_bytes() -> None:
    encoder = ImageEncoder(cache_entries=3)
    images = [png_bytes(4, 4, seed=i) for i in range(10)]
    for data in images:
        encoder.image_part(data)
    assert len(encoder) == 3
    encoder.image_part(images[-1])
    assert encoder.hits == 1
    encoder.image_part(images[0])  # evicted long ago
    assert encoder.misses == 11

    small = ImageEncoder(cache_bytes=300)
    for i in range(10):
        small.image_part(png_bytes(16, 4, seed=i))
    assert small.cached_bytes <= 300


def test_cache_drops_the_least_recently_used() -> None:
    encoder = ImageEncoder(cache_entries=2)
    first, second, third = (png_bytes(4, 4, seed=i) for i in range(3))
    encoder.image_part(first)
    encoder.image_part(second)
    encoder.image_part(first)  # a hit: "first" is now the most recently used
    encoder.image_part(third)  # full: "second" goes
    encoder.image_part(first)
    assert (encoder.hits, encoder.misses) == (2, 3)
    encoder.image_part(second)
    assert (encoder.hits, encoder.misses) == (2, 4)
    assert len(encoder) == 2 and encoder.cached_bytes > 0


def test_caches_are_per_instance() -> None:
    data = png_bytes()
    a, b = ImageEncoder(), ImageEncoder()
    a.image_part(data)
    b.image_part(data)
    assert (a.misses, b.misses) == (1, 1)


def test_detail_option_and_sniff_edge_cases() -> None:
    part = ImageEncoder(detail="low").image_part(GIF)
    assert part is not None and part["image_url"]["detail"] == "low"
    assert sniff_image_mime(b"") is None
    assert sniff_image_mime(b"RIFF\x00\x00\x00\x00WAVE") is None
    with pytest.raises(ValueError):
        ImageEncoder(max_bytes=0)
