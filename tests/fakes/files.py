"""Real files for the document and voice tests, made on the spot (nothing downloaded).

A PDF written by hand (a text layer pypdf can read), a DOCX written by python-docx, a
DOCX-shaped ZIP bomb, QQ-style SILK voice made by the silk-python encoder, an OGG-looking
voice note (the fake speech endpoint never decodes audio).
"""

from __future__ import annotations

import io
import math
import struct
import zipfile
import zlib


def make_pdf(pages: list[str]) -> bytes:
    """A valid PDF with one line of Helvetica text per page."""
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
        objects.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
            ).encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out


def make_docx(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "cell A"
    table.rows[0].cells[1].text = "cell B"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip_bomb_docx(unpacked_mb: int = 40) -> bytes:
    """A small DOCX-shaped ZIP whose document.xml unpacks to `unpacked_mb` MB."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b" " * (unpacked_mb * 1024 * 1024))
    return out.getvalue()


def tone_pcm(seconds: float = 1.0, rate: int = 24_000) -> bytes:
    return b"".join(
        struct.pack("<h", int(8000 * math.sin(i / 10))) for i in range(int(seconds * rate))
    )


def make_silk(seconds: float = 1.0) -> bytes:
    """QQ-style SILK v3 (with Tencent's leading byte), from the silk-python encoder."""
    import pysilk

    out = io.BytesIO()
    pysilk.encode(io.BytesIO(tone_pcm(seconds)), out, 24_000, 24_000, tencent=True)
    return out.getvalue()


OGG_VOICE = b"OggS\x00\x02" + bytes(range(256)) * 4  # looks like OGG; never decoded
MP3_VOICE = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * 200


def make_png(width: int = 8, height: int = 8) -> bytes:
    """A valid RGB PNG (8-bit, no interlace) with a colour gradient, built by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour
    rows = b"".join(
        b"\x00"  # filter type: none
        + b"".join(bytes((255 - 20 * x, 20 * y, 40)) for x in range(width))
        for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )
