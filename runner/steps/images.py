"""The images an llm step shows its model (`images`): its image inputs as they were stored,
and its PDFs' pages rendered as PNGs (`runner.file_images`).

At most `LLM_MAX_IMAGES` in all: a step that would send more fails before anything is
rendered or asked, as does one whose input is neither an image nor a PDF or whose pages are
beyond its PDF. The bytes go only to the model: the step's record says which images were
sent (input, file, page, type, bytes, size in pixels).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from workflows.engine.images import ImageSpec

from ..file_images import PDF, SENDABLE, ImageFailed, page_count, render_pages
from ..models import RunFile
from ..providers import ImagePart
from ..run_files import files_of_run


class ImagesFailed(Exception):
    """The step's images cannot be sent; the message says which and why."""


@dataclass
class StepImages:
    """The images to send, and what the step's record keeps of each."""

    parts: tuple[ImagePart, ...] = ()
    sent: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _Planned:
    where: str  # the item of `images`, for messages
    spec: ImageSpec
    run_file: RunFile
    pages: tuple[int, int] | None  # a PDF's, None for an image sent as it is
    data: bytes = field(default=b"", repr=False)  # a PDF's, read once to count its pages

    @property
    def count(self) -> int:
        return 1 if self.pages is None else self.pages[1] - self.pages[0] + 1


def step_images(run_id: int, specs: Sequence[ImageSpec]) -> StepImages:
    """Read (or render) the step's images from the run's stored files."""
    files = files_of_run(run_id)
    planned: list[_Planned] = []
    for i, spec in enumerate(specs):
        where = f"images[{i}] ('{spec.input}')"
        for run_file in files.get(spec.input, []):
            planned.append(_plan(where, spec, run_file))
    total = sum(p.count for p in planned)
    limit = settings.LLM_MAX_IMAGES
    if total > limit:
        raise ImagesFailed(
            f"the step's images are {total} pictures, more than the {limit} a model call may "
            "show (LLM_MAX_IMAGES): name fewer pages"
        )
    images = StepImages()
    for item in planned:
        _load(item, images)
    return images


def _plan(where: str, spec: ImageSpec, run_file: RunFile) -> _Planned:
    """Check what the item asks of the file; count a PDF's pages (nothing is rendered yet)."""
    name = f"'{run_file.name}'"
    if run_file.media_type in SENDABLE:
        if spec.first_page is not None:
            raise ImagesFailed(f"{where}: {name} is an image; only a PDF has pages")
        return _Planned(where, spec, run_file, None)
    if run_file.media_type != PDF:
        raise ImagesFailed(
            f"{where}: {name} ({run_file.media_type}) is neither an image "
            f"({', '.join(sorted(SENDABLE))}) nor a PDF"
        )
    data = _read(run_file)
    try:
        count = page_count(data)
    except ImageFailed as exc:
        raise ImagesFailed(f"{where}: {name}: {exc}") from None
    first, last = spec.first_page or 1, spec.last_page or count
    if last > count:
        raise ImagesFailed(f"{where}: pages {spec.pages} are beyond {name} ({count} pages)")
    return _Planned(where, spec, run_file, (first, last), data)


def _load(item: _Planned, images: StepImages) -> None:
    run_file = item.run_file
    data = item.data or _read(run_file)
    record = {"input": item.spec.input, "file": str(run_file.pk), "name": run_file.name}
    if item.pages is None:
        images.parts += (ImagePart(run_file.media_type, data),)
        images.sent.append(
            {
                **record,
                "media_type": run_file.media_type,
                "bytes": len(data),
                "width": run_file.width,
                "height": run_file.height,
            }
        )
        return
    first, last = item.pages
    try:
        pictures = render_pages(data, first, last)
    except ImageFailed as exc:
        raise ImagesFailed(f"{item.where}: '{run_file.name}': {exc}") from None
    for page, picture in enumerate(pictures, start=first):
        images.parts += (ImagePart(picture.media_type, picture.data),)
        images.sent.append(
            {
                **record,
                "page": page,
                "media_type": picture.media_type,
                "bytes": len(picture.data),
                "width": picture.width,
                "height": picture.height,
            }
        )


def _read(run_file: RunFile) -> bytes:
    try:
        with run_file.blob.open("rb") as blob:
            data: bytes = blob.read()
    except OSError as exc:
        raise ImagesFailed(f"the file '{run_file.name}' could not be read ({exc})") from None
    return data
