"""Images made from a run's files: a PDF's pages rendered for a model, and thumbnails.

Both are bounded whatever the file says of itself: a page is rendered at most `MAX_SIDE`
pixels on its longer side (and never above `MAX_SCALE`, 144 dpi), a thumbnail at most
`THUMBNAIL_SIDE`; an image declaring more than `RUN_FILE_MAX_PIXELS` is refused before its
pixels are decoded.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass

import pypdfium2
from django.conf import settings
from PIL import Image, UnidentifiedImageError

from knowledge.convert import IMAGE_TYPES, PDF_TYPE

PNG, JPEG = "image/png", "image/jpeg"
# The media types every provider takes as images: such a file is sent as it is.
SENDABLE = IMAGE_TYPES
PDF = PDF_TYPE
# Long enough a side for a model to read a page's small print (Anthropic's advice: 1568 px).
MAX_SIDE = 1568
MAX_SCALE = 2.0
THUMBNAIL_SIDE = 256
# PDFium is not thread-safe: one rendering at a time in a process.
_PDFIUM = threading.Lock()


class ImageFailed(Exception):
    """A file could not be made into an image; the message is fit to show."""


@dataclass(frozen=True)
class Picture:
    """An image's bytes, media type and size in pixels."""

    data: bytes
    media_type: str
    width: int
    height: int


def page_count(data: bytes) -> int:
    """Return how many pages a PDF has."""
    with _PDFIUM:
        document = _open_pdf(data)
        try:
            return len(document)
        finally:
            document.close()


def render_pages(data: bytes, first: int, last: int) -> list[Picture]:
    """Render a PDF's pages `first` to `last` (from 1, within its pages) as PNGs."""
    pictures: list[Picture] = []
    with _PDFIUM:
        document = _open_pdf(data)
        try:
            for index in range(first - 1, last):
                page = document[index]
                try:
                    width, height = page.get_size()  # in points, 72 a inch
                    scale = min(MAX_SCALE, MAX_SIDE / max(width, height, 1))
                    bitmap = page.render(scale=scale)
                    image = bitmap.to_pil()
                    bitmap.close()
                finally:
                    page.close()
                pictures.append(_encoded(image, PNG))
        except pypdfium2.PdfiumError as exc:
            raise ImageFailed(f"a page could not be rendered ({exc})") from None
        finally:
            document.close()
    return pictures


def thumbnail(data: bytes, media_type: str) -> Picture:
    """Return a small copy of an image: a JPEG stays a JPEG, anything else becomes a PNG."""
    image = _open_image(data)
    try:
        if media_type == JPEG:
            image.draft("RGB", (THUMBNAIL_SIDE, THUMBNAIL_SIDE))  # decode a scaled JPEG
        image.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageFailed(f"the image could not be read ({exc})") from None
    return _encoded(image, JPEG if media_type == JPEG else PNG)


def thumbnail_size(width: int, height: int) -> tuple[int, int]:
    """Return the size of an image's thumbnail, without reading it."""
    scale = min(1.0, THUMBNAIL_SIDE / max(width, height, 1))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _open_pdf(data: bytes) -> pypdfium2.PdfDocument:
    try:
        return pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        raise ImageFailed(f"it could not be read as a PDF ({exc})") from None


def _open_image(data: bytes) -> Image.Image:
    """Open an image, refusing one that declares more pixels than a run's file may have."""
    try:
        image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise ImageFailed(f"it could not be read as an image ({exc})") from None
    width, height = image.size
    if width * height > settings.RUN_FILE_MAX_PIXELS:
        raise ImageFailed(
            f"it declares {width}x{height} pixels, more than {settings.RUN_FILE_MAX_PIXELS}"
        )
    return image


def _encoded(image: Image.Image, media_type: str) -> Picture:
    out = io.BytesIO()
    if media_type == JPEG:
        image.convert("RGB").save(out, format="JPEG", quality=85)
    else:
        if image.mode not in ("RGB", "RGBA", "L", "LA", "P"):
            image = image.convert("RGBA")
        image.save(out, format="PNG", optimize=False)
    return Picture(out.getvalue(), media_type, image.width, image.height)
