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
    return _pdf_file(objects)


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


def make_lying_docx(inflated_mb: int, claimed: int = 1024) -> bytes:
    """A real DOCX whose word/document.xml really inflates to `inflated_mb` MB of spaces
    while both its headers claim `claimed` bytes (with that prefix's CRC): every size
    check that reads the headers passes. About 1 kB per inflated MB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = b" " * (1024 * 1024)
    bomb = b"".join(packer.compress(block) for _ in range(inflated_mb)) + packer.flush()
    with zipfile.ZipFile(io.BytesIO(make_docx(["x"]))) as real:
        entries = [(i.filename, real.read(i)) for i in real.infolist()]
    out = io.BytesIO()
    central = b""
    for name, body in entries:
        raw = zlib.compress(body)[2:-4]  # raw deflate, as ZIP stores it
        if name == "word/document.xml":
            body, raw = b" " * claimed, bomb
        head = struct.pack(
            "<HHHHHIIIHH", 20, 0, 8, 0, 0x21, zlib.crc32(body), len(raw), len(body),
            len(name), 0,
        )  # fmt: skip
        offset = out.tell()
        out.write(b"PK\x03\x04" + head + name.encode() + raw)
        central += b"PK\x01\x02" + struct.pack("<H", 20) + head
        central += struct.pack("<HHHII", 0, 0, 0, 0, offset) + name.encode()
    start = out.tell()
    out.write(central)
    out.write(
        b"PK\x05\x06"
        + struct.pack("<HHHHIIH", 0, 0, len(entries), len(entries), len(central), start, 0)
    )
    return out.getvalue()


def make_spinning_pdf(stream_mb: float = 2.0, pages: int = 50) -> bytes:
    """A few kB of PDF that keeps pypdf busy for minutes: one FlateDecode content stream of
    `stream_mb` MB of no-op operators (with one Tj, so it is not skipped as text-free),
    drawn by each of `pages` pages. Every page re-parses it in pure Python."""
    ops = b"BT /F1 9 Tf (a) Tj " + b"1 0 0 1 0 0 cm " * int(stream_mb * 1024 * 1024 / 15) + b"ET"
    packed = zlib.compress(ops, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (5 + i) for i in range(pages)), pages),
        b"<< /Filter /FlateDecode /Length %d >>\nstream\n" % len(packed) + packed + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 3 0 R >>"
    )
    objects += [page] * pages
    return _pdf_file(objects)


def _pdf_file(objects: list[bytes]) -> bytes:
    """Numbered objects (1..n, the first the catalog), an xref table and the trailer."""
    out = bytearray(b"%PDF-1.4\n")  # grown in place: a long PDF has thousands of objects
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
    return bytes(out)


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


def make_wav(seconds: float, rate: int = 8_000, *, declared_frames: int | None = None) -> bytes:
    """A real mono 8-bit WAV of silence; `declared_frames` writes a lying frame count
    into its header (the data chunk still holds `seconds` of sound)."""
    frames = int(seconds * rate)
    data_size = frames if declared_frames is None else declared_frames
    header = b"RIFF" + struct.pack("<I", 36 + data_size) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate, 1, 8)
    header += b"data" + struct.pack("<I", data_size)
    return header + b"\x80" * frames


def encode_audio(seconds: float, fmt: str, codec: str, rate: int) -> bytes:
    """A real tone in `fmt`/`codec`, encoded with PyAV (decodes like any phone's note)."""
    import av

    pcm = tone_pcm(seconds, rate)
    out = io.BytesIO()
    with av.open(out, mode="w", format=fmt) as sink:
        stream = sink.add_stream(codec, rate=rate)
        stream.layout = "mono"
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.sample_rate = rate
        frame.planes[0].update(pcm)
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        for ready in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(ready):
                sink.mux(packet)
        for packet in stream.encode(None):
            sink.mux(packet)
    return out.getvalue()


OGG_VOICE = encode_audio(1.0, "ogg", "libopus", 48_000)  # a real 1 s OGG/Opus voice note
MP3_VOICE = encode_audio(1.0, "mp3", "libmp3lame", 24_000)


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


def make_long_pdf(pages: int, chars_per_page: int = 3000) -> bytes:
    """A PDF of `pages` pages, each with `chars_per_page` characters of text in 60-character
    lines (uncompressed: a 3,000-page PDF of 3,000 characters a page is about 11 MB)."""
    line = "The quick brown fox jumps over the lazy dog, page {:>6}.   "
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the kids are numbered
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for number in range(1, pages + 1):
        text = line.format(number)
        rows = [f"({text}) Tj T*" for _ in range(max(1, chars_per_page // len(text)))]
        content = ("BT /F1 9 Tf 11 TL 36 760 Td " + " ".join(rows) + " ET").encode("latin-1")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (len(objects) + 2)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages)
    return _pdf_file(objects)


def make_long_docx(paragraphs: int, chars_per_paragraph: int = 300) -> bytes:
    """A real DOCX (python-docx's template) whose body holds `paragraphs` paragraphs of
    text, written as XML directly: python-docx takes minutes to add 100,000 paragraphs."""
    with zipfile.ZipFile(io.BytesIO(make_docx(["x"]))) as real:
        entries = [(i.filename, real.read(i)) for i in real.infolist()]
    word = "lorem ipsum dolor sit amet "
    text = (word * (chars_per_paragraph // len(word) + 1))[:chars_per_paragraph]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in entries:
            if name == "word/document.xml":
                head, rest = body.split(b"<w:body>", 1)  # the template's "x" and table stay last
                paras = b"".join(
                    b"<w:p><w:r><w:t>%d %s</w:t></w:r></w:p>" % (n, text.encode())
                    for n in range(paragraphs)
                )
                body = head + b"<w:body>" + paras + rest
            archive.writestr(name, body)
    return out.getvalue()
