"""Sample documents written when a test needs one: PDFs by fpdf2, images by Pillow.

No binary is checked in: each test says what its document holds.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from fpdf import FPDF
from PIL import Image

# A Visa test number: it passes the Luhn check, as the PII detector asks.
VALID_CARD = "4111 1111 1111 1111"


def png(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A PNG of one color."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def jpeg(width: int = 64, height: int = 48) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 90, 200)).save(out, format="JPEG")
    return out.getvalue()


def pdf(
    pages: Sequence[str],
    *,
    images_on: Sequence[int] = (),
    logo_on: Sequence[int] = (),
    title: str = "",
) -> bytes:
    """A PDF with a page for each text (lines split on newlines), a picture of its own on each
    page numbered (from 1) in `images_on`, and one same picture (fpdf2 writes it once) on each
    page in `logo_on`."""
    document = FPDF()
    document.set_auto_page_break(auto=True, margin=15)
    if title:
        document.set_title(title)
    document.set_font("helvetica", size=12)
    for number, text in enumerate(pages, start=1):
        document.add_page()
        for line in text.splitlines() or [""]:
            document.multi_cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
        if number in images_on:
            document.image(io.BytesIO(png(120, 80, (number % 256, 30, 30))), x=20, y=120, w=60)
        if number in logo_on:
            document.image(io.BytesIO(png(40, 40, (10, 10, 10))), x=150, y=10, w=20)
    return bytes(document.output())


def encrypted_pdf(text: str = "Secret") -> bytes:
    """A PDF that opens only with a password."""
    document = FPDF()
    document.set_encryption(owner_password="owner", user_password="user")
    document.set_font("helvetica", size=12)
    document.add_page()
    document.cell(0, 10, text)
    return bytes(document.output())


def huge_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A small PNG whose header declares `width` x `height` pixels (a decompression bomb)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\0" * 64)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def inflating_pdf(megabytes: int = 100) -> bytes:
    """A PDF of one page whose content stream is a hundred KB or so that inflates to
    `megabytes` MB (a zip bomb in a PDF; pypdf stops inflating at 75 MB)."""
    import zlib

    compressor = zlib.compressobj(9)
    chunk = b"0 0 m " * (1024 * 1024 // 6)
    stream = b"".join(compressor.compress(chunk) for _ in range(megabytes)) + compressor.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = b"%PDF-1.7\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out
