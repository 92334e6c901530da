"""Small documents of every format the knowledge bases read, made by the tests themselves.

PDFs are written with pypdf (a page per text, Helvetica, optionally encrypted), DOCX files with
python-docx; the zip bombs are zips whose directory gives them away.
"""

from __future__ import annotations

import io
import zipfile

import docx
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

MARKDOWN = b"""# Lighthouse Guide

Keepers trim the wick every evening.

## Storms

During a storm the lamp burns all night and the keeper logs the wind.
"""

HTML = b"""<!doctype html>
<html><head><title>Harbour Rules</title><style>p { color: red }</style>
<script>alert("never indexed")</script></head>
<body>
<h1>Harbour Rules</h1>
<p>Boats <b>moor</b> at the east quay.</p>
<h2>Fees</h2>
<ul><li>Small boats pay two coins.</li><li>Large boats pay five.</li></ul>
<table><tr><th>Boat</th><th>Fee</th></tr><tr><td>Dinghy</td><td>2</td></tr></table>
<!-- a comment that is never indexed -->
</body></html>
"""


def pdf(*pages: str, title: str | None = None, password: str | None = None) -> bytes:
    """Return a PDF with one page per text (one line each)."""
    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    if title:
        writer.add_metadata({"/Title": title})
    if password:
        writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def word(title: str | None = "Ferry Timetable") -> bytes:
    """Return a DOCX with a title, headings, a list, a paragraph and a table."""
    document = docx.Document()
    if title:
        document.core_properties.title = title
    document.add_heading("Ferry Timetable", level=1)
    document.add_paragraph("The ferry leaves the harbour at dawn.")
    document.add_heading("Winter", level=2)
    document.add_paragraph("Only two crossings a day.", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Day"
    table.cell(0, 1).text = "Crossings"
    table.cell(1, 0).text = "Monday"
    table.cell(1, 1).text = "2"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def word_of(paragraphs: list[str]) -> bytes:
    """Return a DOCX of these paragraphs."""
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_of(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def inflating_docx(megabytes: int = 8) -> bytes:
    """Return a 'DOCX' whose document part inflates about a thousand times."""
    return zip_of(
        {
            "[Content_Types].xml": b"<Types/>",
            "word/document.xml": b"\0" * (megabytes * 1024 * 1024),
        }
    )


def many_parts_docx(parts: int = 1500) -> bytes:
    """Return a 'DOCX' of more parts than any Word document has."""
    return zip_of({f"word/part{i}.xml": b"<x/>" for i in range(parts)})
