"""A run's file read: its type from its bytes, its text page by page, the images it embeds,
and a clear refusal for each file that cannot be read safely."""

from __future__ import annotations

import io

import docx
import pytest
from django.test import override_settings
from PIL import Image

from knowledge.convert import ConversionError, convert, read_document
from tests import documents
from tests.knowledge import files


def image_bytes(kind: str, width: int = 30, height: int = 20) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (1, 2, 3)).save(out, format=kind)
    return out.getvalue()


def paged_docx() -> bytes:
    document = docx.Document()
    document.add_paragraph("Cover page")
    document.add_picture(io.BytesIO(documents.png()))
    document.add_page_break()
    document.add_paragraph("Second page")
    document.add_page_break()
    document.add_paragraph("Third page")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_pdf_is_read_page_by_page_with_its_pictures_counted() -> None:
    pdf = documents.pdf(["Alpha", "", f"Card {documents.VALID_CARD}"], images_on=[1, 3])

    read = read_document("scan.bin", pdf, "text/plain")  # neither name nor type is believed

    assert (read.format, read.media_type) == ("pdf", "application/pdf")
    assert read.pages == ["Alpha", "", f"Card {documents.VALID_CARD}"]
    assert read.text == f"Alpha\n\nCard {documents.VALID_CARD}"
    assert read.image_count == 2


def test_a_pdf_of_pictures_only_is_read_with_no_text() -> None:
    read = read_document("scan.pdf", documents.pdf([""], images_on=[1]))

    assert (read.pages, read.text, read.image_count) == ([""], "", 1)


def test_a_docx_is_split_at_its_page_breaks_and_its_pictures_counted() -> None:
    read = read_document("report.docx", paged_docx())

    assert read.media_type.endswith("wordprocessingml.document")
    assert read.pages == ["Cover page", "Second page", "Third page"]
    assert read.image_count == 1


def test_a_knowledge_base_reads_the_same_docx_as_one_text() -> None:
    assert convert("report.docx", paged_docx()).text == "Cover page\n\nSecond page\n\nThird page"


@pytest.mark.parametrize(
    ("name", "data", "fmt", "media_type"),
    [
        ("notes.txt", b"Plain words", "text", "text/plain"),
        ("notes.md", b"# Title\n\nBody", "markdown", "text/markdown"),
        ("page.html", b"<html><body><p>Hi</p></body></html>", "html", "text/html"),
        ("noname", b"<!doctype html><p>Hi</p>", "html", "text/html"),
    ],
)
def test_text_documents_are_one_page(name: str, data: bytes, fmt: str, media_type: str) -> None:
    read = read_document(name, data)

    assert (read.format, read.media_type, len(read.pages), read.image_count) == (
        fmt,
        media_type,
        1,
        0,
    )
    assert read.text == read.pages[0] and read.text


@pytest.mark.parametrize(
    ("kind", "media_type"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
def test_an_image_has_no_text_and_its_size_from_its_header(kind: str, media_type: str) -> None:
    read = read_document(f"picture.{kind.lower()}", image_bytes(kind, 30, 20), "text/plain")

    assert (read.format, read.media_type) == ("image", media_type)
    assert (read.text, read.pages, read.image_count) == ("", [], 1)
    assert (read.width, read.height) == (30, 20)


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("secret.pdf", documents.encrypted_pdf(), "the PDF is encrypted"),
        ("secret.pdf", files.pdf("x", password="pw"), "the PDF is encrypted"),
        ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog", "the PDF cannot be read"),
        (
            "bomb.pdf",
            files.zip_of({"a.txt": b"x" * 1000}),
            "the file is named .pdf but is not a PDF (it is a zip archive)",
        ),
        ("photo.pdf", documents.png(), "is not a PDF (it is a PNG image)"),
        ("inflating.pdf", documents.inflating_pdf(), "page 1 of the PDF inflates beyond"),
        ("fake.png", b"plain text", "is named .png but is not a PNG image"),
        ("bomb.docx", files.inflating_docx(), "(it may be a zip bomb)"),
        ("parts.docx", files.many_parts_docx(), "(it may be a zip bomb)"),
        ("archive.zip", files.zip_of({"a.txt": b"x"}), "zip archive, not a document"),
        ("huge.png", documents.huge_png(), "(it may be a decompression bomb)"),
        ("cut.png", documents.png()[:60], "the image cannot be read"),
        ("binary.bin", bytes(range(256)) * 4, "unknown format"),
        ("empty.txt", b"", "the file is empty"),
        ("blank.txt", b"  \n\n ", "the file holds no text"),
        ("old.doc", b"Plain words", "Word 97-2003 (.doc) files are not read"),
    ],
)
def test_a_file_that_cannot_be_read_safely_is_refused_saying_why(
    name: str, data: bytes, said: str
) -> None:
    with pytest.raises(ConversionError) as refused:
        read_document(name, data)

    assert said in str(refused.value)


def test_an_image_over_the_pixel_limit_is_refused_before_it_is_decoded() -> None:
    with (
        override_settings(RUN_FILE_MAX_PIXELS=500),
        pytest.raises(ConversionError, match=r"30 x 20 pixels; at most 500 pixels"),
    ):
        read_document("p.png", image_bytes("PNG", 30, 20))


def test_a_picture_drawn_on_several_pages_is_one_image_of_the_pdf() -> None:
    pdf = documents.pdf(["One", "Two", "Three"], images_on=[2], logo_on=[1, 2, 3])

    read = read_document("letter.pdf", pdf)

    assert read.image_count == 2  # the logo (written once, drawn thrice) and page 2's picture


def test_a_pdf_of_more_pages_than_a_run_takes_is_refused_before_they_are_read() -> None:
    pdf = documents.pdf(["a"] * 6)

    with override_settings(RUN_FILE_MAX_PAGES=5):
        with pytest.raises(ConversionError) as refused:
            read_document("long.pdf", pdf)
        assert str(refused.value) == "the PDF has 6 pages, more than the 5 a run's file may have"
        assert read_document("short.pdf", documents.pdf(["a"] * 5)).pages == ["a"] * 5
        # A knowledge base reads it all the same: its documents are not judged page by page.
        assert convert("long.pdf", pdf).text


def test_a_docx_of_more_pages_than_a_run_takes_is_refused() -> None:
    with (
        override_settings(RUN_FILE_MAX_PAGES=2),
        pytest.raises(ConversionError, match="the document has 3 pages, more than the 2"),
    ):
        read_document("paged.docx", paged_docx())
