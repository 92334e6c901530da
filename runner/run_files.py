"""Files given to runs: what an upload is, and the stored files a run's steps read.

An upload (API multipart or base64 JSON, the run form, the CLI's `--input NAME=@PATH`) is an
`Upload` in the inputs given to `services.run_start`; the run keeps a reference to each stored
file (`workflows.engine.files.REF_FIELDS`), never its bytes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .models import RunFile


@dataclass(frozen=True)
class Upload:
    """A file as a client sent it, not yet checked: its name may hold anything."""

    filename: str
    data: bytes
    content_type: str | None = None

    def __repr__(self) -> str:  # never the bytes in a log or an error
        return f"Upload({self.filename!r}, {len(self.data)} bytes, {self.content_type!r})"


def files_of_run(run_id: int) -> dict[str, list[RunFile]]:
    """The run's stored files by input name, each input's in order (without their bytes)."""
    found: dict[str, list[RunFile]] = defaultdict(list)
    for run_file in RunFile.objects.filter(run_id=run_id).order_by("input_name", "position"):
        found[run_file.input_name].append(run_file)
    return dict(found)
