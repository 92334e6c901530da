"""Files given to a run in a test that starts it by hand, stored as the upload intake stores
them: a RunFile row with its bytes, text and pages read by `read_document`, and the run's ref
to it in its inputs (and its state's)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from django.core.files.base import ContentFile

from knowledge.convert import read_document
from runner.models import Run, RunFile


def attach_files(
    run: Run, input_name: str, files: Sequence[tuple[str, bytes]], *, several: bool = False
) -> list[RunFile]:
    """Store `files` (name, bytes) as the run's `input_name` (a files input when `several`)
    and put their refs in the run's inputs."""
    rows = []
    refs: list[dict[str, Any]] = []
    for position, (name, data) in enumerate(files):
        read = read_document(name, data)
        pages, image_count, media_type = read.pages, read.image_count, read.media_type
        row = RunFile(
            run=run,
            input_name=input_name,
            position=position,
            name=name,
            media_type=media_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            text=read.text,
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
