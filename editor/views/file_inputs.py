"""The run monitor's file inputs: the files a run was given, and thumbnails of its images.

A thumbnail is served with the run's permissions (another's run, or a file not of the run, is
a 404), made from the stored bytes each time it is asked for (bounded by `runner.file_images`)
and never kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from runner.file_images import SENDABLE, ImageFailed, thumbnail, thumbnail_size
from runner.models import Run, RunFile
from runner.selectors import run_file_get


@dataclass(frozen=True)
class ShownFile:
    """A file of the run as the monitor lists it; an image's thumbnail size (None: no image)."""

    file: RunFile
    thumbnail: tuple[int, int] | None


def shown_files(run: Run) -> list[ShownFile]:
    """The run's files, each input's in order, with the size of each image's thumbnail."""
    shown = []
    for run_file in RunFile.objects.filter(run=run).defer("text", "pages"):
        size = None
        if _has_thumbnail(run_file) and run_file.width and run_file.height:
            size = thumbnail_size(run_file.width, run_file.height)
        shown.append(ShownFile(run_file, size))
    return shown


@login_required
@require_GET
def run_file_thumbnail(request: HttpRequest, run_id: int, file_id: UUID) -> HttpResponse:
    """Serve a small copy of one of the run's image inputs."""
    run_file = run_file_get(user=request.user, run_id=run_id, file_id=file_id)
    if not _has_thumbnail(run_file):
        raise Http404("No such image in the run.")
    try:
        with run_file.blob.open("rb") as blob:
            picture = thumbnail(blob.read(), run_file.media_type)
    except (OSError, ImageFailed):
        raise Http404("The image cannot be shown.") from None
    response = HttpResponse(picture.data, content_type=picture.media_type)
    response["X-Content-Type-Options"] = "nosniff"
    # The run's files never change: a browser may keep the thumbnail, a shared cache may not.
    response["Cache-Control"] = "private, max-age=86400"
    return response


def _has_thumbnail(run_file: RunFile) -> bool:
    return run_file.media_type in SENDABLE
