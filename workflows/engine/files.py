"""File inputs: what a recipe says of them, and the reference a run keeps of each file.

A recipe input `{"type": "file"}` (one file) or `{"type": "files"}` (several) may say which
media types it takes (`accept`, e.g. `["application/pdf", "image/*"]`), how large a file may
be (`max_bytes`) and, for `files`, how many (`max_files`). The bytes never enter a run's state
or events: the run keeps a `FileRef` of each file (its id in the runner's store, its name,
type, size, pages and embedded images), and the runner reads the text and pages from its store
when a template or a detector asks.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.checks import is_int, listed
from workflows.engine.reading import DocumentReader
from workflows.engine.vocabulary import FILE_INPUT_TYPES

FILE, FILES = FILE_INPUT_TYPES
# The fields of a file input's spec, besides type, required and description.
SPEC_FIELDS = ("accept", "max_bytes", "max_files")
DEFAULT_MAX_FILES = 20
MAX_FILES = 100
# A media type as `accept` names it: `type/subtype`, or `type/*`.
_MEDIA_RANGE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/(\*|[a-z0-9][a-z0-9!#$&^_.+-]*)")
# The keys of a run's reference to a stored file, and their types.
REF_FIELDS: dict[str, type] = {
    "file": str,
    "name": str,
    "media_type": str,
    "size": int,
    "pages": int,
    "image_count": int,
}


def is_file_type(kind: object) -> bool:
    return kind in FILE_INPUT_TYPES


def read_file_spec(
    spec: Mapping[str, Any], path: str, reader: DocumentReader, kind: str
) -> dict[str, Any]:
    """Return a file input's `accept`, `max_bytes` and `max_files` as the recipe gives them
    (only those it gives), reporting each wrong one to `reader`."""
    parsed: dict[str, Any] = {}
    accept = spec.get("accept")
    if accept is not None:
        if (
            not isinstance(accept, list)
            or not accept
            or not all(isinstance(item, str) and _MEDIA_RANGE.fullmatch(item) for item in accept)
        ):
            reader.error(
                f"{path}.accept",
                "must be a non-empty list of media types, e.g. application/pdf or image/*",
            )
        else:
            parsed["accept"] = list(dict.fromkeys(accept))
    max_bytes = spec.get("max_bytes")
    if max_bytes is not None:
        if not is_int(max_bytes) or max_bytes < 1:
            reader.error(f"{path}.max_bytes", "must be a whole number of bytes, at least 1")
        else:
            parsed["max_bytes"] = max_bytes
    max_files = spec.get("max_files")
    if max_files is not None:
        if kind != FILES:
            reader.error(f"{path}.max_files", "only a files input takes several files")
        elif not is_int(max_files) or not 1 <= max_files <= MAX_FILES:
            reader.error(f"{path}.max_files", f"must be a whole number from 1 to {MAX_FILES}")
        else:
            parsed["max_files"] = max_files
    if spec.get("default") is not None:
        reader.error(f"{path}.default", "a file input has no default: a run uploads its files")
    return parsed


def accepts(accept: Sequence[str] | None, media_type: str) -> bool:
    """Tell whether `media_type` is one `accept` names (any type when it names none)."""
    if not accept:
        return True
    return any(fnmatch.fnmatchcase(media_type.lower(), pattern) for pattern in accept)


def ref_problem(kind: str, value: object) -> str | None:
    """Return why `value` is not what a run keeps of a `file` / `files` input, or None."""
    refs = value if kind == FILES else [value]
    if kind == FILES and (not isinstance(value, list) or not value):
        return "must be one file or more (upload them)"
    for ref in refs if isinstance(refs, list) else []:
        if not isinstance(ref, Mapping) or any(
            not isinstance(ref.get(key), wanted) or isinstance(ref.get(key), bool)
            for key, wanted in REF_FIELDS.items()
        ):
            return "must be an uploaded file"
    return None


def file_refs(value: object) -> list[Mapping[str, Any]]:
    """The refs of a file or files input's value (none when it has no file)."""
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return [ref for ref in value if isinstance(ref, Mapping)]
    return []


def describe_accept(accept: Sequence[str] | None) -> str:
    return listed(accept) if accept else "any type"
