"""Turn an uploaded file into text: plain text, Markdown, HTML, PDF or DOCX; read a run's file.

`convert` gives a knowledge base a document's title and text. `read_document` reads a file given
to a run (`runner/run_files.py`): its type sniffed from its bytes, its text page by page, the
images it embeds, and for an image (PNG, JPEG, GIF, WEBP) its size, checked against
RUN_FILE_MAX_PIXELS before anything is decoded.

The text is Markdown-like whatever the source: headings become `#` lines (the chunker splits on
them and a chunk cites them), paragraphs are separated by blank lines, table rows are cells
joined by ` | `. Uploads are untrusted: every refusal is a `ConversionError` whose message can be
shown as it is, and a DOCX is checked as a zip (entries, sizes, compression ratio) before
python-docx decompresses anything.
"""

from __future__ import annotations

import io
import re
import unicodedata
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import charset_normalizer
import docx
import pypdf
from bs4 import UnicodeDammit
from django.conf import settings
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree
from PIL import Image

TEXT = "text"
MARKDOWN = "markdown"
HTML = "html"
PDF = "pdf"
DOCX = "docx"
FORMATS = (TEXT, MARKDOWN, HTML, PDF, DOCX)
IMAGE = "image"  # a run's file only: knowledge bases take no images

_EXTENSIONS = {
    ".txt": TEXT,
    ".text": TEXT,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".mdown": MARKDOWN,
    ".mkd": MARKDOWN,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
    ".pdf": PDF,
    ".docx": DOCX,
}
_CONTENT_TYPES = {
    "text/plain": TEXT,
    "text/markdown": MARKDOWN,
    "text/x-markdown": MARKDOWN,
    "text/html": HTML,
    "application/xhtml+xml": HTML,
    "application/pdf": PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DOCX,
}
# Formats people try that are not read: a clearer refusal than "unknown format".
_NOT_READ = {".doc": "Word 97-2003 (.doc)", ".odt": "OpenDocument (.odt)", ".rtf": "RTF"}

# A DOCX is a zip: a legitimate one has tens of entries that compress 5 to 30 times; a zip bomb
# has thousands of entries or a tiny entry that inflates to gigabytes. What it unpacks to is
# capped at a few times the upload limit (its pictures barely compress; its XML does), and
# at most DOCX_MAX_UNCOMPRESSED_BYTES: parsing the XML takes memory and time in proportion.
DOCX_MAX_ENTRIES = 1000
DOCX_MAX_UNCOMPRESSED_BYTES = 100 * 1024 * 1024
DOCX_MAX_UNPACK_FACTOR = 5
DOCX_MAX_RATIO = 100
# Entries smaller than this are not judged by their ratio (a few bytes of XML may compress a lot).
_RATIO_CHECKED_FROM = 1024 * 1024

TITLE_MAX_CHARS = 300

_HEADING_STYLE = re.compile(r"heading\s*([1-9])", re.IGNORECASE)
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
# Characters no text column can hold (NUL), or that are noise from extraction (other C0
# controls but tab and newline, lone surrogates).
_UNWANTED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# Kinds of block written on consecutive lines when they follow each other.
_ITEM = "item"
_ROW = "row"
_PREFERRED_ENCODINGS = ("cp1252", "latin_1", "iso8859_15")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")


class ConversionError(Exception):
    """The file cannot be turned into text; the message says why, for the uploader."""


class FileTooLarge(ConversionError):
    """The file is larger than KNOWLEDGE_MAX_UPLOAD_BYTES."""


class TextTooLong(ConversionError):
    """The file's text is longer than KNOWLEDGE_MAX_TEXT_CHARS."""


@dataclass(frozen=True)
class Converted:
    title: str
    format: str
    text: str


@dataclass(frozen=True)
class DocumentRead:
    """A file given to a run, read: `media_type` is what its bytes are, whatever its name or
    the client said; an image has no text nor pages, and is its one image."""

    format: str
    media_type: str
    text: str
    pages: list[str]
    image_count: int
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True)
class _Read:
    """What a converter reads: the title, the text of each page, the images embedded."""

    title: str
    pages: list[str]
    image_count: int = 0

    @property
    def text(self) -> str:
        return "\n\n".join(page for page in self.pages if page)


def max_pages() -> int:
    """The most pages a file given to a run may have: each may cost a model call (a safety
    judge's), so a document of thousands of short pages is refused at upload."""
    return int(settings.RUN_FILE_MAX_PAGES)


def _too_many_pages(count: int, most: int, what: str = "document") -> str:
    return f"the {what} has {count:,} pages, more than the {most:,} a run's file may have"


def max_upload_bytes() -> int:
    """Return the largest file a knowledge base takes, in bytes."""
    return int(settings.KNOWLEDGE_MAX_UPLOAD_BYTES)


def max_text_chars() -> int:
    """Return the longest text a document may convert to, in characters."""
    return int(settings.KNOWLEDGE_MAX_TEXT_CHARS)


def docx_max_unpacked_bytes() -> int:
    """Return how many bytes a DOCX may unpack to."""
    return min(DOCX_MAX_UNCOMPRESSED_BYTES, DOCX_MAX_UNPACK_FACTOR * max_upload_bytes())


def check_text_length(length: int) -> None:
    """Refuse a text of `length` characters if it is over the limit."""
    limit = max_text_chars()
    if length > limit:
        raise TextTooLong(
            f"the file's text is over {limit:,} characters, the most a document may hold; "
            "split it into smaller files"
        )


def check_size(size: int) -> None:
    """Refuse a file of `size` bytes if it is over the limit (before it is read, if possible)."""
    limit = max_upload_bytes()
    if size > limit:
        raise FileTooLarge(f"the file is {size:,} bytes; the limit is {limit:,} bytes")


def convert(filename: str, data: bytes, content_type: str | None = None) -> Converted:
    """Return the file's title, format and text; raise ConversionError if it cannot be read."""
    check_size(len(data))
    name = base_name(filename)
    if not data:
        raise ConversionError("the file is empty")
    fmt = detect_format(name, data, content_type)
    read = _CONVERTERS[fmt](data)
    text = read.text
    check_text_length(len(text))
    text = clean_text(text)
    if not text.strip():
        raise ConversionError("the file holds no text")
    title = " ".join((read.title or "").split()) or _stem(name) or "Untitled"
    return Converted(title=title[:TITLE_MAX_CHARS], format=fmt, text=text)


def read_document(filename: str, data: bytes, content_type: str | None = None) -> DocumentRead:
    """Read a file given to a run; raise ConversionError (a message fit to show) if it cannot
    be read. Its size is the caller's to bound (RUN_FILE_MAX_BYTES)."""
    if not data:
        raise ConversionError("the file is empty")
    fmt, media_type = sniff_format(base_name(filename), data, content_type)
    if fmt == IMAGE:
        width, height = _image_size(data, media_type)
        return DocumentRead(fmt, media_type, "", [], 1, width, height)
    most = max_pages()
    # A PDF's pages are counted before any is read; a DOCX's once its page breaks are found.
    read = _pdf(data, most) if fmt == PDF else _CONVERTERS[fmt](data)
    if len(read.pages) > most:
        raise ConversionError(_too_many_pages(len(read.pages), most))
    check_text_length(len(read.text))
    pages = [clean_text(page) for page in read.pages]
    text = "\n\n".join(page for page in pages if page)
    if fmt not in (PDF, DOCX) and not text.strip():
        # A PDF or DOCX may be all pictures (a scan); a text file of no text is a mistake.
        raise ConversionError("the file holds no text")
    return DocumentRead(fmt, media_type, text, pages, read.image_count)


def base_name(filename: str) -> str:
    """Return the file's name without any folder (browsers may send `C:\\fakepath\\x.pdf`)."""
    name = PureWindowsPath(PurePosixPath(filename or "").name).name
    return _UNWANTED.sub("", name).strip()


def _stem(name: str) -> str:
    return PurePosixPath(name).stem.replace("_", " ").strip()


def detect_format(name: str, data: bytes, content_type: str | None) -> str:
    """Return the file's format: by its extension, else by its content, else its media type."""
    suffix = PurePosixPath(name.lower()).suffix
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    if suffix in _NOT_READ:
        raise ConversionError(
            f"{_NOT_READ[suffix]} files are not read; save it as DOCX, PDF or text"
        )
    head = data[:1024]
    if head.lstrip().startswith(b"%PDF-"):
        return PDF
    if head.startswith(b"PK\x03\x04"):
        if b"word/" in data[:65536] or b"[Content_Types].xml" in data[:65536]:
            return DOCX
        raise ConversionError("the file is a zip archive, not a document")
    sniffed = head.lstrip().lower()
    if sniffed.startswith((b"<!doctype html", b"<html")):
        return HTML
    declared = (content_type or "").split(";")[0].strip().lower()
    if declared in _CONTENT_TYPES:
        return _CONTENT_TYPES[declared]
    if _looks_like_text(data):
        return TEXT
    kind = f" ({declared})" if declared and declared != "application/octet-stream" else ""
    raise ConversionError(
        f"unknown format{kind}; knowledge bases take text, Markdown, HTML, PDF and DOCX files"
    )


# What a run's file is, by its first bytes: the formats that say so themselves.
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_MEDIA_TYPES = {
    TEXT: "text/plain",
    MARKDOWN: "text/markdown",
    HTML: "text/html",
    PDF: "application/pdf",
    DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
# Names that promise a format its bytes must have (a zip named .pdf is no PDF).
_BINARY_EXTENSIONS = {
    ".pdf": "a PDF",
    ".docx": "a DOCX",
    ".png": "a PNG image",
    ".jpg": "a JPEG image",
    ".jpeg": "a JPEG image",
    ".gif": "a GIF image",
    ".webp": "a WEBP image",
}
_PILLOW_FORMATS = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
}
# The images a run takes (and every provider is shown as they are).
IMAGE_TYPES = frozenset(_PILLOW_FORMATS)
PDF_TYPE = _MEDIA_TYPES[PDF]


def sniff_format(name: str, data: bytes, content_type: str | None) -> tuple[str, str]:
    """Return a run's file's format and media type, from its bytes (a name or a declared type
    only tells text from Markdown or HTML); refuse a file that is not what its name says."""
    head = data[:1024]
    sniffed = _sniffed_binary(head, data)
    suffix = PurePosixPath(name.lower()).suffix
    promised = _BINARY_EXTENSIONS.get(suffix)
    if promised is not None and (
        sniffed is None or _BINARY_EXTENSIONS.get(_extension_of(sniffed[1])) != promised
    ):
        actually = _what_it_is(head, sniffed)
        raise ConversionError(f"the file is named {suffix} but is not {promised}{actually}")
    if sniffed is not None:
        return sniffed
    if head.startswith(b"PK\x03\x04"):
        raise ConversionError("the file is a zip archive, not a document")
    if suffix in _NOT_READ:
        raise ConversionError(
            f"{_NOT_READ[suffix]} files are not read; save it as DOCX, PDF or text"
        )
    declared = (content_type or "").split(";")[0].strip().lower()
    if not _looks_like_text(data):
        raise ConversionError(
            "unknown format; a run takes text, Markdown, HTML, PDF and DOCX files and PNG, "
            "JPEG, GIF and WEBP images"
        )
    if head.lstrip().lower().startswith((b"<!doctype html", b"<html")):
        fmt = HTML
    elif _EXTENSIONS.get(suffix) in (MARKDOWN, HTML):
        fmt = _EXTENSIONS[suffix]
    elif _CONTENT_TYPES.get(declared) in (MARKDOWN, HTML) and suffix not in _EXTENSIONS:
        fmt = _CONTENT_TYPES[declared]
    else:
        fmt = TEXT
    return fmt, _MEDIA_TYPES[fmt]


def _sniffed_binary(head: bytes, data: bytes) -> tuple[str, str] | None:
    if head.lstrip().startswith(b"%PDF-"):
        return PDF, _MEDIA_TYPES[PDF]
    for signature, media_type in _IMAGE_SIGNATURES:
        if head.startswith(signature):
            return IMAGE, media_type
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return IMAGE, "image/webp"
    if head.startswith(b"PK\x03\x04") and (
        b"word/" in data[:65536] or b"[Content_Types].xml" in data[:65536]
    ):
        return DOCX, _MEDIA_TYPES[DOCX]
    return None


def _extension_of(media_type: str) -> str:
    return {
        "application/pdf": ".pdf",
        _MEDIA_TYPES[DOCX]: ".docx",
        "image/png": ".png",
        "image/jpeg": ".jpg",
        "image/gif": ".gif",
        "image/webp": ".webp",
    }.get(media_type, "")


def _what_it_is(head: bytes, sniffed: tuple[str, str] | None) -> str:
    if sniffed is not None:
        return f" (it is {_BINARY_EXTENSIONS[_extension_of(sniffed[1])]})"
    if head.startswith(b"PK\x03\x04"):
        return " (it is a zip archive)"
    return ""


def _image_size(data: bytes, media_type: str) -> tuple[int, int]:
    """Return an image's width and height from its header, refusing one of more pixels than
    RUN_FILE_MAX_PIXELS (a decompression bomb) before it is decoded, or a broken one."""
    limit = int(settings.RUN_FILE_MAX_PIXELS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[_PILLOW_FORMATS[media_type]]) as image:
                width, height = image.size
                if width * height > limit:
                    raise ConversionError(
                        f"the image is {width:,} x {height:,} pixels; at most {limit:,} pixels "
                        "are read (it may be a decompression bomb)"
                    )
                image.verify()
    except ConversionError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ConversionError(
            "the image declares more pixels than are read (it may be a decompression bomb)"
        ) from None
    except Exception as exc:  # Pillow raises many kinds on malformed files
        raise ConversionError(f"the image cannot be read: {_reason(exc)}") from None
    return width, height


def _looks_like_text(data: bytes) -> bool:
    # NUL bytes mean binary, unless the text is UTF-16/32 (which has a BOM, or NULs throughout).
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    return decode_text(data, strict=False) is not None


def decode_text(data: bytes, *, strict: bool = True) -> str | None:
    """Return `data` decoded: UTF-8 if it is, else the encoding charset-normalizer finds.

    A guess that reads badly (see `_poor_guess`) is no guess. With `strict`, an encoding
    not recognised is a ConversionError; without it, None.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_at = exc.start
    if _UTF8_SHAPED.fullmatch(data):
        # Every byte past ASCII is where UTF-8 puts it: broken UTF-8 (an encoded surrogate,
        # a cut character), not another encoding, whatever reading one would give.
        return _undecodable(strict, f"it is not valid UTF-8 (at byte {bad_at:,})")
    matches = list(charset_normalizer.from_bytes(data))
    if not matches:
        return _undecodable(strict, "")
    best = matches[0]
    # A short text often decodes equally well in several code pages; the one Western text in
    # a legacy encoding is most likely in is Windows-1252.
    tied = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
    preferred = next((m for m in tied if m.encoding in _PREFERRED_ENCODINGS), best)
    text = str(preferred)
    if reason := _poor_guess(data, preferred.encoding, preferred.chaos, text):
        return _undecodable(strict, reason)
    return text


# Bytes that are ASCII, or UTF-8's lead and continuation bytes in their places.
_UTF8_SHAPED = re.compile(rb"(?:[\x00-\x7f]|[\xc0-\xf7][\x80-\xbf]{1,3})*")
# charset-normalizer's "mess" of a reading (0: none); it keeps readings up to 0.2 itself.
MAX_CHAOS = 0.1
# The share of a reading that may be characters no text has (controls, unassigned code
# points, private use).
MAX_UNREADABLE = 0.01
_READABLE_CONTROLS = set("\t\n\r\f\v")


def _poor_guess(data: bytes, encoding: str, chaos: float, text: str) -> str:
    """Return why a reading of `data` in `encoding` is garbage, or ''."""
    # Text in UTF-16/32 without a byte order mark has NUL bytes throughout (the high halves
    # of its ASCII); a few bytes paired into CJK characters are not text.
    if (
        encoding.startswith(("utf_16", "utf_32"))
        and not data.startswith((b"\xff\xfe", b"\xfe\xff"))
        and data.count(b"\x00") * 8 < len(data)
    ):
        return f"it reads as {encoding} only by pairing its bytes into unrelated characters"
    if chaos > MAX_CHAOS:
        return f"its best reading ({encoding}) is {chaos:.0%} noise"
    unreadable = sum(
        1
        for char in text
        if char not in _READABLE_CONTROLS and unicodedata.category(char) in ("Cc", "Cn", "Co")
    )
    if unreadable > MAX_UNREADABLE * len(text):
        return f"its best reading ({encoding}) has {unreadable:,} unreadable characters"
    return ""


def _undecodable(strict: bool, reason: str) -> None:
    if not strict:
        return None
    because = f": {reason}" if reason else ""
    raise ConversionError(
        f"the text's encoding cannot be recognised{because}; save the file as UTF-8"
    )


def clean_text(text: str) -> str:
    """Return `text` with one kind of line end, no characters a database or reader chokes on,
    no trailing spaces and at most one blank line in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n")
    text = _UNWANTED.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip("\n")


# Plain text and Markdown ------------------------------------------------------------------------


def _text(data: bytes) -> _Read:
    return _Read("", [decode_text(data) or ""])


def _markdown(data: bytes) -> _Read:
    text = atx_headings(clean_text(decode_text(data) or ""))
    return _Read(first_heading(text, level=1), [text])


def atx_headings(text: str) -> str:
    """Return Markdown `text` with its underlined (setext) headings written as `#` lines."""
    lines = text.split("\n")
    out: list[str] = []
    fence = ""
    for line in lines:
        if fence:
            if line.strip().startswith(fence):
                fence = ""
            out.append(line)
            continue
        if opened := _FENCE.match(line):
            fence = opened.group(1)[:3]
            out.append(line)
            continue
        underline = _SETEXT_UNDERLINE.match(line)
        previous = out[-1] if out else ""
        if underline and _is_paragraph_line(previous) and (len(out) < 2 or not out[-2].strip()):
            level = "#" if underline.group(1).startswith("=") else "##"
            out[-1] = f"{level} {previous.strip()}"
            continue
        out.append(line)
    return "\n".join(out)


def _is_paragraph_line(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("#", "-", "*", "+", ">", "|", "```", "~~~"))


def first_heading(text: str, *, level: int | None = None) -> str:
    """Return the first `#` heading of Markdown `text` (of `level`, if given), or ''."""
    fence = ""
    for line in text.split("\n"):
        if fence:
            fence = "" if line.strip().startswith(fence) else fence
            continue
        if opened := _FENCE.match(line):
            fence = opened.group(1)[:3]
            continue
        match = _ATX_HEADING.match(line)
        if match and (level is None or len(match.group(1)) == level):
            return match.group(2).strip()
    return ""


# HTML -------------------------------------------------------------------------------------------

_DROPPED_TAGS = {
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "iframe",
    "object",
    "embed",
    "canvas",
    "head",
    "form",
    "button",
    "select",
}
_BLOCK_TAGS = {
    "address",
    "article",
    "aside",
    "blockquote",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "thead",
    "tfoot",
    "ul",
    "caption",
}
_HEADING_TAGS = {f"h{level}": level for level in range(1, 7)}


def _html(data: bytes) -> _Read:
    # lxml's parser calls the target back as it reads (no tree is built): linear in the size
    # of the page however its tags nest, and no limit on their depth.
    markup = UnicodeDammit(data, is_html=True).unicode_markup or ""
    target = _HtmlText()
    parser = etree.HTMLParser(target=target, recover=True, no_network=True)
    try:
        parser.feed(markup)
        parser.close()
    except ConversionError:
        raise
    except (etree.LxmlError, ValueError) as exc:
        raise ConversionError(f"the HTML cannot be read: {_reason(exc)}") from None
    text = join_blocks(target.blocks)
    return _Read(target.title or first_heading(text, level=1), [text])


def _capped(blocks: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """Yield the blocks, refusing the document as soon as their text is over the limit (a
    huge document is not walked to its end)."""
    total = 0
    for block in blocks:
        total += len(block[1]) + 2
        check_text_length(total)
        yield block


def join_blocks(blocks: Iterable[tuple[str, str]]) -> str:
    """Join (kind, text) blocks: list items that follow each other on consecutive lines (one
    paragraph), table rows likewise; everything else with a blank line between."""
    out: list[str] = []
    previous = ""
    for kind, text in blocks:
        if out:
            out.append("\n" if kind and kind == previous else "\n\n")
        out.append(text)
        previous = kind
    return "".join(out)


class _HtmlText:
    """An lxml parser target that turns HTML into blocks (headings, paragraphs, list items,
    table rows) as its tags open and close, and keeps its <title>."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, str]] = []
        self.title = ""
        self._length = 0
        self._inline: list[str] = []
        # One entry per open tag: its name and what its end does.
        self._open: list[tuple[str, str]] = []
        self._open_count: dict[str, int] = {}
        self._dropped = 0  # open tags whose content is not text (scripts, styles...)
        self._title: list[str] | None = None
        self._heading: list[str] | None = None
        self._heading_level = 0
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def start(self, tag: Any, attrib: Any, nsmap: Any = None) -> None:
        name = tag.lower() if isinstance(tag, str) else ""
        action = "inline"
        if name == "title" and self._title is None and not self.title:
            self._title = []
            action = "title"
        elif self._dropped or name in _DROPPED_TAGS:
            self._dropped += 1
            action = "dropped"
        elif self._heading is not None or self._cell is not None:
            # Inside a heading or a table cell: everything is its text, words apart.
            self._words().append(" ")
        elif self._row is not None:
            if name in ("td", "th"):
                self._cell = []
                action = "cell"
        elif name in _HEADING_TAGS:
            self._flush()
            self._heading = []
            self._heading_level = _HEADING_TAGS[name]
            action = "heading"
        elif name == "br":
            self._inline.append("\n")
        elif name == "tr":
            self._flush()
            self._row = []
            action = "row"
        elif name in _BLOCK_TAGS:
            self._flush()
            if name == "li":
                self._inline.append("- ")
            action = "block"
        self._open.append((name, action))
        self._open_count[name] = self._open_count.get(name, 0) + 1

    def end(self, tag: Any) -> None:
        name = tag.lower() if isinstance(tag, str) else ""
        if not self._open_count.get(name):
            return  # an end tag nothing opened
        while self._open:
            opened, action = self._open.pop()
            self._open_count[opened] -= 1
            self._close(action)
            if opened == name:
                return

    def data(self, text: str) -> None:
        if self._title is not None:
            self._title.append(text)
        elif self._dropped:
            return
        elif self._heading is not None or self._cell is not None:
            self._words().append(text)
        elif self._row is None:
            self._inline.append(text)

    def close(self) -> None:
        while self._open:
            self._close(self._open.pop()[1])
        self._flush()

    def _words(self) -> list[str]:
        words = self._cell if self._cell is not None else self._heading
        assert words is not None
        return words

    def _close(self, action: str) -> None:
        if action == "title":
            self.title = " ".join("".join(self._title or []).split())
            self._title = None
        elif action == "dropped":
            self._dropped -= 1
        elif action == "heading":
            heading = " ".join("".join(self._heading or []).split())
            self._heading = None
            if heading:
                self._add("", f"{'#' * self._heading_level} {heading}")
        elif action == "cell":
            assert self._row is not None
            self._row.append(" ".join("".join(self._cell or []).split()))
            self._cell = None
        elif action == "row":
            cells, self._row = self._row or [], None
            if any(cells):
                self._add(_ROW, " | ".join(cells))
        elif action == "block":
            self._flush()

    def _flush(self) -> None:
        lines = [" ".join(line.split()) for line in "".join(self._inline).split("\n")]
        text = "\n".join(line for line in lines if line)
        if text and text != "-":
            self._add(_ITEM if text.startswith("- ") else "", text)
        self._inline.clear()

    def _add(self, kind: str, text: str) -> None:
        # A page too long is refused as soon as it is known to be.
        self._length += len(text) + 2
        check_text_length(self._length)
        self.blocks.append((kind, text))


# PDF --------------------------------------------------------------------------------------------


def _pdf(data: bytes, max_pages: int | None = None) -> _Read:
    """Read a PDF's pages and count its images; past `max_pages` pages (a run's file), refuse
    it before reading any."""
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opens_without_password(reader):
            raise ConversionError("the PDF is encrypted (password protected) and cannot be read")
        if max_pages is not None and len(reader.pages) > max_pages:
            raise ConversionError(_too_many_pages(len(reader.pages), max_pages, "PDF"))
        pages = []
        total = 0
        images: set[int] = set()
        for number, page in enumerate(reader.pages, start=1):
            _check_inflation(page, number)
            pages.append((page.extract_text() or "").strip())
            total += len(pages[-1]) + 2
            check_text_length(total)
            images |= _page_images(page)
        metadata = reader.metadata
        title = str(metadata.title or "") if metadata is not None else ""
    except ConversionError:
        raise
    except Exception as exc:  # pypdf raises many kinds on malformed files
        raise ConversionError(f"the PDF cannot be read: {_reason(exc)}") from None
    return _Read(title, pages, len(images))


def _check_inflation(page: Any, number: int) -> None:
    """Refuse a page whose content inflates past pypdf's bound (a zip bomb in a PDF): its
    text extraction would pass over it and read the page as blank."""
    try:
        contents = page.get_contents()
        if contents is not None:
            contents.get_data()
    except pypdf.errors.LimitReachedError:
        raise ConversionError(
            f"page {number} of the PDF inflates beyond what is read (it may be a zip bomb)"
        ) from None
    except Exception:  # anything else is the text extraction's to judge
        pass


# XObjects looked at per page at most: a page's forms may nest, or loop back on themselves.
_MAX_XOBJECTS_PER_PAGE = 10_000


def _page_images(page: Any) -> set[object]:
    """The image XObjects a PDF page draws from (in its forms too), none decoded: each by its
    object number, so that a logo drawn on every page is one image of the document."""
    seen: set[int] = set()
    images: set[object] = set()
    resources = [page.get("/Resources")]
    while resources and len(seen) < _MAX_XOBJECTS_PER_PAGE:
        found = resources.pop()
        found = found.get_object() if found is not None else None
        xobjects = found.get("/XObject") if isinstance(found, dict) else None
        xobjects = xobjects.get_object() if xobjects is not None else None
        if not isinstance(xobjects, dict):
            continue
        for reference in xobjects.values():
            number = getattr(reference, "idnum", None)
            key = number or id(reference)
            if key in seen:
                continue
            seen.add(key)
            xobject = reference.get_object()
            if not isinstance(xobject, dict):
                continue
            if xobject.get("/Subtype") == "/Image":
                # An object written in place (not by reference) is its own image.
                images.add(number or object())
            elif xobject.get("/Subtype") == "/Form":
                resources.append(xobject.get("/Resources"))
    return images


def _opens_without_password(reader: pypdf.PdfReader) -> bool:
    # Many PDFs are encrypted with an empty user password (only their editing is restricted).
    try:
        return reader.decrypt("") != pypdf.PasswordType.NOT_DECRYPTED
    except Exception:  # an unsupported cipher, or one that needs a library not installed
        return False


# DOCX -------------------------------------------------------------------------------------------


def _docx(data: bytes) -> _Read:
    images = check_docx_archive(data)
    try:
        document = docx.Document(io.BytesIO(data))
        title = document.core_properties.title or ""
        pages = _docx_pages(_capped(_docx_blocks(document)))
    except ConversionError:
        raise
    except Exception as exc:  # python-docx and lxml raise many kinds on malformed files
        raise ConversionError(f"the DOCX cannot be read: {_reason(exc)}") from None
    text = "\n\n".join(page for page in pages if page)
    return _Read(title or first_heading(text, level=1) or first_heading(text), pages, images)


def _docx_pages(blocks: Iterable[tuple[str, str]]) -> list[str]:
    """Join the blocks into pages, a new one at each page break the document has."""
    pages: list[list[tuple[str, str]]] = [[]]
    for block in blocks:
        if block[0] == _PAGE_BREAK:
            pages.append([])
        else:
            pages[-1].append(block)
    return [join_blocks(page) for page in pages]


def check_docx_archive(data: bytes) -> int:
    """Refuse a DOCX that is not a zip, not a Word document, or a zip bomb (from its directory,
    before anything is decompressed); return how many pictures it holds (in word/media/)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError):
        raise ConversionError("the DOCX is not a valid file (it is not a zip archive)") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > DOCX_MAX_ENTRIES:
            raise ConversionError(
                f"the DOCX holds {len(entries):,} parts; at most {DOCX_MAX_ENTRIES:,} are read "
                "(it may be a zip bomb)"
            )
        total = sum(entry.file_size for entry in entries)
        limit = docx_max_unpacked_bytes()
        if total > limit:
            raise ConversionError(
                f"the DOCX unpacks to {total:,} bytes; at most {limit:,} are read "
                "(it may be a zip bomb)"
            )
        for entry in entries:
            if entry.file_size < _RATIO_CHECKED_FROM:
                continue
            ratio = entry.file_size / max(entry.compress_size, 1)
            if ratio > DOCX_MAX_RATIO:
                raise ConversionError(
                    f"the DOCX part {entry.filename[:100]} inflates {ratio:,.0f} times; at most "
                    f"{DOCX_MAX_RATIO} is read (it may be a zip bomb)"
                )
        if "word/document.xml" not in archive.namelist():
            raise ConversionError("the DOCX is not a Word document (it has no word/document.xml)")
        return sum(
            1
            for entry in entries
            if entry.filename.startswith("word/media/") and not entry.is_dir()
        )


# A block that is no text: where a DOCX starts a new page.
_PAGE_BREAK = "page"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _docx_blocks(document: Any) -> Iterator[tuple[str, str]]:
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            page_break = _page_break(item)
            if page_break == "before":
                yield _PAGE_BREAK, ""
            if block := _docx_paragraph(item):
                yield (_ITEM if block.startswith("- ") else ""), block
            if page_break == "after":
                yield _PAGE_BREAK, ""
        elif isinstance(item, Table):
            yield from ((_ROW, row) for row in _docx_table(item))


def _page_break(paragraph: Paragraph) -> str:
    """Where a paragraph's explicit page break puts a new page: "before" it (the break comes
    before its text, or its style says so), "after" it, or "" (none)."""
    element = paragraph._p
    properties = element.pPr
    if properties is not None:
        before = properties.find(f"{_W}pageBreakBefore")
        if before is not None and before.get(f"{_W}val") not in ("0", "false", "off"):
            return "before"
    text_seen = False
    for node in element.iter(f"{_W}t", f"{_W}br"):
        if node.tag == f"{_W}t":
            text_seen = text_seen or bool(node.text and node.text.strip())
        elif node.get(f"{_W}type") == "page":
            return "after" if text_seen else "before"
    return ""


def _docx_paragraph(paragraph: Paragraph) -> str:
    text = " ".join(paragraph.text.split())
    if not text:
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style.lower() == "title":
        return f"# {text}"
    if heading := _HEADING_STYLE.fullmatch(style.strip()):
        return f"{'#' * min(int(heading.group(1)), 6)} {text}"
    if style.lower().startswith("list"):
        return f"- {text}"
    return text


def _docx_table(table: Table) -> Iterator[str]:
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # A merged cell is repeated once per grid column it spans.
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            yield " | ".join(cells)


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:200]
    return text or type(exc).__name__


_CONVERTERS: dict[str, Callable[[bytes], _Read]] = {
    TEXT: _text,
    MARKDOWN: _markdown,
    HTML: _html,
    PDF: _pdf,
    DOCX: _docx,
}
