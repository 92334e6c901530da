"""Files given to a run in a test, stored as the upload intake stores them: a RunFile row with
its bytes, text and pages, and the run's ref to it in its inputs (and its state's)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from typing import Any

import pytest
from django.core.files.base import ContentFile
from pypdf import PdfReader

from runner import run_files
from runner.models import Run, RunFile

# Runs started with uploads need the upload intake (`run_files.take_uploads`), built beside
# this branch: its tests run once it is merged.
needs_uploads = pytest.mark.skipif(
    not hasattr(run_files, "take_uploads"), reason="needs the upload intake (take_uploads)"
)


def read_pages(data: bytes) -> tuple[list[str], int]:
    """The page texts and embedded images of a PDF (pypdf), or a text file as one page."""
    if data.startswith(b"%PDF-"):
        reader = PdfReader(io.BytesIO(data))
        return (
            [page.extract_text() or "" for page in reader.pages],
            sum(len(page.images) for page in reader.pages),
        )
    return [data.decode()], 0


def attach_files(
    run: Run, input_name: str, files: Sequence[tuple[str, bytes]], *, several: bool = False
) -> list[RunFile]:
    """Store `files` (name, bytes) as the run's `input_name` (a files input when `several`)
    and put their refs in the run's inputs."""
    rows = []
    refs: list[dict[str, Any]] = []
    for position, (name, data) in enumerate(files):
        pages, image_count = read_pages(data)
        media_type = "application/pdf" if data.startswith(b"%PDF-") else "text/plain"
        row = RunFile(
            run=run,
            input_name=input_name,
            position=position,
            name=name,
            media_type=media_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            text="\n\n".join(pages),
            pages=pages,
            image_count=image_count,
        )
        row.blob.save(name, ContentFile(data), save=False)
        row.save()
        rows.append(row)
        refs.append(
            {
                "file": str(row.id),
                "name": name,
                "media_type": media_type,
                "size": len(data),
                "pages": len(pages),
                "image_count": image_count,
            }
        )
    value: Any = refs if several else refs[0]
    run.inputs = {**run.inputs, input_name: value}
    run.state = {**run.state, "inputs": {**run.state["inputs"], input_name: value}}
    run.save(update_fields=["inputs", "state"])
    return rows
