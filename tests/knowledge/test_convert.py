"""Uploaded files become Markdown-like text, or a ConversionError that says why not."""

from __future__ import annotations

import time

import pytest

from knowledge import convert as convert_module
from knowledge.convert import ConversionError, FileTooLarge, TextTooLong, convert
from tests.knowledge import files


def test_it_reads_markdown_and_takes_its_first_heading_as_title() -> None:
    converted = convert("guide.md", files.MARKDOWN)

    assert converted.format == "markdown"
    assert converted.title == "Lighthouse Guide"
    assert converted.text.startswith("# Lighthouse Guide\n\nKeepers trim the wick")
    assert "## Storms" in converted.text


def test_it_writes_underlined_markdown_headings_as_hash_lines() -> None:
    text = b"Guide\n=====\n\nIntro.\n\nInstall\n-------\n\nRun it.\n\n```\nnot\n---\n```\n"

    converted = convert("guide.markdown", text)

    assert converted.text.startswith("# Guide\n\nIntro.\n\n## Install\n\nRun it.")
    assert "```\nnot\n---\n```" in converted.text  # code stays code


def test_it_reads_html_keeping_headings_and_dropping_scripts_and_styles() -> None:
    converted = convert("rules.html", files.HTML)

    assert converted.format == "html"
    assert converted.title == "Harbour Rules"
    assert converted.text == (
        "# Harbour Rules\n\n"
        "Boats moor at the east quay.\n\n"
        "## Fees\n\n"
        "- Small boats pay two coins.\n- Large boats pay five.\n\n"
        "Boat | Fee\nDinghy | 2"
    )
    for hidden in ("alert", "color: red", "comment"):
        assert hidden not in converted.text


def test_it_reads_deeply_nested_html_without_running_out_of_stack() -> None:
    page = b"<div>" * 5000 + b"<p>deep down</p>" + b"</div>" * 5000

    assert convert("deep.html", page).text == "deep down"


def test_it_reads_pdf_text_page_by_page() -> None:
    converted = convert("tides.pdf", files.pdf("High tide at noon.", "Low tide (at dusk)."))

    assert converted.format == "pdf"
    assert converted.title == "tides"
    assert converted.text == "High tide at noon.\n\nLow tide (at dusk)."


def test_it_takes_a_pdf_title_from_its_metadata() -> None:
    assert convert("x.pdf", files.pdf("Text.", title="Tide Tables")).title == "Tide Tables"


def test_it_reads_a_pdf_encrypted_with_an_empty_password() -> None:
    assert convert("x.pdf", files.pdf("Open to all.", password="")).text == "Open to all."


def test_it_reads_docx_headings_lists_and_tables() -> None:
    converted = convert("ferry.docx", files.word())

    assert converted.format == "docx"
    assert converted.title == "Ferry Timetable"
    assert converted.text == (
        "# Ferry Timetable\n\n"
        "The ferry leaves the harbour at dawn.\n\n"
        "## Winter\n\n"
        "- Only two crossings a day.\n\n"
        "Day | Crossings\nMonday | 2"
    )


def test_a_docx_without_a_title_is_named_by_its_first_heading() -> None:
    assert convert("x.docx", files.word(title=None)).title == "Ferry Timetable"


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("cp1252", "Café au lait — a naïve résumé, 5 €."),
        ("latin-1", "Grüße aus München, schöne Straße."),
        ("utf-16", "Tide tables — ebb and flow, naïve café."),
        ("utf-8-sig", "A byte order mark, then café."),
    ],
)
def test_it_recognises_the_encoding_of_text(encoding: str, text: str) -> None:
    converted = convert("notes.txt", text.encode(encoding))

    assert converted.format == "text"
    assert converted.title == "notes"
    assert converted.text == text


@pytest.mark.parametrize(
    ("name", "data", "content_type", "expected"),
    [
        ("upload", files.pdf("sniffed"), None, "pdf"),
        ("upload", files.word(), "application/octet-stream", "docx"),
        ("upload", b"<!DOCTYPE html><p>hi</p>", None, "html"),
        ("upload", b"# Notes\n\nplain words", "text/markdown", "markdown"),
        ("upload", b"plain words", None, "text"),
        ("notes.log", b"plain words", None, "text"),
        # The extension wins over what the content looks like.
        ("page.txt", b"<html><p>kept as text</p></html>", "text/html", "text"),
    ],
)
def test_it_chooses_the_format_by_extension_then_content(
    name: str, data: bytes, content_type: str | None, expected: str
) -> None:
    assert convert(name, data, content_type).format == expected


def test_it_keeps_no_folder_from_the_filename_and_no_unstorable_characters() -> None:
    converted = convert("C:\\fakepath\\tide\x00s.txt", b"tide\x00 tables\r\nebb\rflow")

    assert converted.title == "tides"
    assert converted.text == "tide tables\nebb\nflow"


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.txt", b"", "the file is empty"),
        ("blank.md", b"  \n\n \t \n", "the file holds no text"),
        ("blank.html", b"<html><script>x()</script></html>", "the file holds no text"),
        ("blank.pdf", files.pdf(""), "the file holds no text"),
        ("image.png", bytes(range(256)) * 8, "unknown format"),
        ("old.doc", b"\xd0\xcf\x11\xe0 word 97", r"Word 97-2003 \(.doc\) files are not read"),
        ("archive.zip", files.zip_of({"a.txt": b"a"}), "a zip archive, not a document"),
        ("broken.pdf", b"%PDF-1.4\nnot really", "the PDF cannot be read"),
        ("secret.pdf", files.pdf("hidden", password="s3cret"), "the PDF is encrypted"),
        ("fake.docx", b"plain text, not a zip", "not a valid file .it is not a zip archive."),
        ("other.docx", files.zip_of({"a.txt": b"a"}), "not a Word document"),
        ("bomb.docx", files.inflating_docx(), r"inflates 1,0\d\d times.*zip bomb"),
        ("parts.docx", files.many_parts_docx(), "holds 1,500 parts.*zip bomb"),
        (
            "bad.docx",
            files.zip_of({"[Content_Types].xml": b"<broken", "word/document.xml": b"<w/>"}),
            "the DOCX cannot be read",
        ),
    ],
)
def test_it_refuses_what_it_cannot_read(name: str, data: bytes, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        convert(name, data)


def test_it_refuses_a_docx_that_unpacks_to_too_much(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert_module, "DOCX_MAX_UNCOMPRESSED_BYTES", 10_000)
    data = files.zip_of({"word/document.xml": b"x" * 20_000}, compression=0)

    with pytest.raises(ConversionError, match="unpacks to 20,000 bytes"):
        convert("big.docx", data)


def test_it_refuses_a_file_over_the_size_limit(settings: object) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 100  # type: ignore[attr-defined]

    with pytest.raises(FileTooLarge, match="the file is 101 bytes; the limit is 100 bytes"):
        convert("big.txt", b"x" * 101)
    assert convert("fits.txt", b"x" * 100).text == "x" * 100


def test_a_docx_may_unpack_to_a_few_times_the_upload_limit_only(settings: object) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 10_000  # type: ignore[attr-defined]
    # 60,000 bytes of XML deflate to a few hundred: well under the upload limit.
    data = files.zip_of({"word/document.xml": b"<w/>" * 15_000})

    with pytest.raises(ConversionError, match="unpacks to 60,000 bytes; at most 50,000 are read"):
        convert("bomb.docx", data)


def test_a_docx_never_unpacks_to_more_than_a_hundred_megabytes(settings: object) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 1024 * 1024 * 1024  # type: ignore[attr-defined]

    assert convert_module.docx_max_unpacked_bytes() == 100 * 1024 * 1024


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("long.txt", b"x" * 1001),
        ("long.md", b"# Long\n\n" + b"word " * 300),
        ("long.html", b"<p>" + b"word " * 300 + b"</p>"),
        ("long.pdf", files.pdf("word " * 150, "word " * 150)),
        ("long.docx", files.word_of(["word " * 150] * 2)),
    ],
    ids=["text", "markdown", "html", "pdf", "docx"],
)
def test_it_refuses_a_text_longer_than_the_limit(settings: object, name: str, data: bytes) -> None:
    settings.KNOWLEDGE_MAX_TEXT_CHARS = 1000  # type: ignore[attr-defined]

    with pytest.raises(TextTooLong, match=r"text is over 1,000 characters.*smaller files"):
        convert(name, data)


def test_a_text_of_the_limit_fits(settings: object) -> None:
    settings.KNOWLEDGE_MAX_TEXT_CHARS = 1000  # type: ignore[attr-defined]

    assert len(convert("fits.txt", b"x" * 1000).text) == 1000


def test_it_reads_a_page_of_unclosed_tags_in_linear_time() -> None:
    # Every <div> is left open: a parser that builds a tree nests them 40,000 deep.
    page = b"<html><body>" + b"<div><p>hello <b>world</b> foo</p>" * 40_000 + b"</body></html>"

    started = time.monotonic()
    text = convert("open.html", page).text
    elapsed = time.monotonic() - started

    assert text.split("\n\n") == ["hello world foo"] * 40_000
    assert elapsed < 5, f"{elapsed:.1f} s"


def test_it_reads_html_in_its_declared_encoding_and_keeps_the_title_of_the_head() -> None:
    page = (
        b'<html><head><meta charset="windows-1252"><title>Caf\xe9 rules</title></head>'
        b"<body><h2>Menu</h2><p>Cr\xe8me br\xfbl\xe9e<br>th\xe9</p>"
        b"<table><tr><td>tea<table><tr><td>inner</td></tr></table></td><td>2</td></tr></table>"
        b"</body></html>"
    )

    converted = convert("cafe.html", page)

    assert converted.title == "Café rules"
    assert converted.text == "## Menu\n\nCrème brûlée\nthé\n\ntea inner | 2"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        # UTF-8 with an encoded surrogate: once read as UTF-16, "ꃭ憀换".
        (b"\xed\xa0\x80abc", "it is not valid UTF-8 .at byte 0."),
        (b"caf\xc3", "it reads as utf_16_be only by pairing its bytes"),
    ],
    ids=["encoded-surrogate", "cut-character"],
)
def test_it_refuses_text_whose_encoding_reads_as_garbage(data: bytes, reason: str) -> None:
    with pytest.raises(ConversionError, match=f"encoding cannot be recognised: {reason}"):
        convert("notes.txt", data)


@pytest.mark.parametrize(
    ("encoding", "text"),
    [("cp1251", "Привет, как дела? Это тест."), ("shift_jis", "日本語のテキストです。")],
)
def test_it_still_reads_text_in_other_legacy_encodings(encoding: str, text: str) -> None:
    assert convert("notes.txt", text.encode(encoding)).text == text
