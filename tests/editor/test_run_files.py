"""The run monitor's file inputs: listed with their size and a download link, images shown as
thumbnails (sized, their names escaped), served only to those who may see the run."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import NoReverseMatch, reverse
from PIL import Image

from runner.models import Run, RunFile
from runner.services import run_start
from tests.documents import jpeg, pdf, png
from tests.editor.conftest import story_document
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

HOSTILE = '<img src=x onerror="alert(1)">.png'


@pytest.fixture
def looks(author: Any, story_actors: None) -> Recipe:
    """The story recipe with a photo and a scan to go with its topic."""
    inputs = {
        "topic": {"type": "string", "required": True},
        "photo": {"type": "file", "accept": ["image/*"]},
        "scan": {"type": "file", "accept": ["application/pdf"]},
    }
    recipe = recipe_import(user=author, data=story_document(slug="looks", inputs=inputs)).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


@pytest.fixture
def run(author: Any, looks: Recipe) -> Run:
    return run_start(user=author, recipe=looks, inputs={"topic": "owls"})


def stored(run: Run, input_name: str, name: str, media_type: str, data: bytes) -> RunFile:
    width = height = None
    if media_type.startswith("image/"):
        width, height = Image.open(io.BytesIO(data)).size
    return RunFile.objects.create(
        run=run,
        input_name=input_name,
        name=name,
        media_type=media_type,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        blob=ContentFile(data, name="upload"),
        width=width,
        height=height,
    )


def thumbnail_url(run_file: RunFile) -> str:
    return reverse("run-file-thumbnail", args=[run_file.run_id, run_file.pk])


def huge_png() -> bytes:
    """A small PNG whose header declares 100,000 x 100,000 pixels."""
    data = bytearray(png(1, 1))
    header = b"IHDR" + struct.pack(">II", 100_000, 100_000) + bytes(data[24:29])
    data[12:29] = header
    data[29:33] = struct.pack(">I", zlib.crc32(header))
    return bytes(data)


def test_the_monitor_lists_the_runs_files_with_thumbnails_of_its_images(
    web: Client, run: Run
) -> None:
    photo = stored(run, "photo", HOSTILE, "image/png", png(640, 480))
    scan = stored(run, "scan", "scan.pdf", "application/pdf", pdf(["One", "Two"]))

    html = web.get(f"/runs/{run.pk}/").content.decode()

    assert "<h2>Files</h2>" in html
    # The photo's thumbnail, sized without reading it, its name escaped wherever shown.
    assert f'src="{thumbnail_url(photo)}" width="256" height="192"' in html
    assert 'alt="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;.png"' in html
    assert '<img src=x onerror="alert(1)">' not in html
    assert "640 x 480 px" in html
    # The scan is listed, with no thumbnail.
    assert "scan.pdf" in html and thumbnail_url(scan) not in html
    assert "application/pdf · " in html
    # A file input's value is its files' refs: not shown among the other inputs.
    assert "<dt>topic</dt>" in html and "<dt>photo</dt>" not in html
    try:
        download = reverse("run-file-page", args=[run.pk, scan.pk])
    except NoReverseMatch:  # the download view is not there yet: the name is shown alone
        assert '<span class="file-name">scan.pdf</span>' in html
    else:
        assert f'href="{download}" download>scan.pdf</a>' in html


def test_a_monitor_without_files_shows_no_files(web: Client, run: Run) -> None:
    html = web.get(f"/runs/{run.pk}/").content.decode()
    assert "<h2>Files</h2>" not in html and "<dt>topic</dt>" in html


@pytest.mark.parametrize(
    ("media_type", "data", "served_as", "size"),
    [
        ("image/png", png(640, 480), "PNG", (256, 192)),
        ("image/jpeg", jpeg(300, 600), "JPEG", (128, 256)),
        ("image/png", png(40, 30), "PNG", (40, 30)),  # small already: as it is
    ],
)
def test_a_thumbnail_is_a_small_copy_of_the_image(
    web: Client, run: Run, media_type: str, data: bytes, served_as: str, size: tuple[int, int]
) -> None:
    photo = stored(run, "photo", "photo", media_type, data)

    response = web.get(thumbnail_url(photo))

    assert response.status_code == 200
    assert response["Content-Type"] == media_type
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Cache-Control"] == "private, max-age=86400"
    image = Image.open(io.BytesIO(response.content))
    assert (image.format, image.size) == (served_as, size)


def test_a_stranger_gets_404_for_a_thumbnail(stranger_web: Client, run: Run) -> None:
    photo = stored(run, "photo", "photo.png", "image/png", png())
    assert stranger_web.get(thumbnail_url(photo)).status_code == 404


def test_a_thumbnail_needs_a_login(run: Run) -> None:
    photo = stored(run, "photo", "photo.png", "image/png", png())
    response = Client().get(thumbnail_url(photo))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_file_of_another_run_is_not_found_under_this_one(
    web: Client, author: Any, looks: Recipe, run: Run
) -> None:
    other = run_start(user=author, recipe=looks, inputs={"topic": "bats"})
    photo = stored(other, "photo", "photo.png", "image/png", png())

    url = reverse("run-file-thumbnail", args=[run.pk, photo.pk])

    assert web.get(url).status_code == 404
    assert web.get(thumbnail_url(photo)).status_code == 200


@pytest.mark.parametrize(
    ("media_type", "data"),
    [
        ("application/pdf", pdf(["A page"])),  # no thumbnail: only images have one
        ("image/png", huge_png()),  # refused before its pixels are decoded
        ("image/png", b"\x89PNG\r\n\x1a\n broken"),
    ],
)
def test_a_file_that_has_no_thumbnail_is_not_found(
    web: Client, run: Run, media_type: str, data: bytes
) -> None:
    run_file = RunFile.objects.create(
        run=run,
        input_name="scan",
        name="file",
        media_type=media_type,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        blob=ContentFile(data, name="upload"),
    )
    assert web.get(thumbnail_url(run_file)).status_code == 404
