"""Files given to runs: what an upload is, how it is checked and stored, and the stored files a
run's steps read.

An upload (API multipart or base64 JSON, the run form, the CLI's `--input NAME=@PATH`) is an
`Upload` in the inputs given to `services.run_start`; the run keeps a reference to each stored
file (`workflows.engine.files.REF_FIELDS`), never its bytes. `take_uploads` checks and reads the
uploads (nothing is stored yet: a refusal leaves nothing behind), and `attach` stores them in
the transaction that inserts the run.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import math
import re
import time
import unicodedata
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.http import FileResponse

from knowledge.convert import (
    IMAGE_TYPES,
    PDF_TYPE,
    ConversionError,
    DocumentRead,
    read_document,
    sniff_format,
)
from workflows.engine.files import (
    DEFAULT_MAX_FILES,
    FILE,
    FILES,
    accepts,
    describe_accept,
    is_file_type,
)

from .inputs import InputsInvalid
from .models import RunFile, run_file_path
from .outages import BROKER_ERRORS

log = logging.getLogger(__name__)

NAME_MAX_CHARS = 255
_ASCII_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")
# Media types served as themselves (a browser shows them, and none runs a script); any other
# file is served as bytes to save.
SERVED_AS_IS = IMAGE_TYPES | {PDF_TYPE}
RATE_WINDOW_SECONDS = 60
# What a JSON client sends for a file: its name, its bytes in base64, the type it says it is.
BASE64_FIELD = "content_base64"
UPLOAD_HINT = (
    f"upload a file (multipart/form-data, or {{name, {BASE64_FIELD}, media_type}} in JSON)"
)


@dataclass(frozen=True)
class Upload:
    """A file as a client sent it, not yet checked: its name may hold anything."""

    filename: str
    data: bytes
    content_type: str | None = None
    # Counted against the user's upload rate already, as the request bringing it was read.
    counted: bool = False

    def __repr__(self) -> str:  # never the bytes in a log or an error
        return f"Upload({self.filename!r}, {len(self.data)} bytes, {self.content_type!r})"


@dataclass(frozen=True)
class PendingFile:
    """A checked upload, read, waiting for its run to be inserted (`attach`)."""

    id: uuid.UUID
    input_name: str
    position: int
    name: str
    data: bytes
    read: DocumentRead

    def ref(self) -> dict[str, Any]:
        """What the run's inputs keep of the file (`workflows.engine.files.REF_FIELDS`)."""
        return {
            "file": str(self.id),
            "name": self.name,
            "media_type": self.read.media_type,
            "size": len(self.data),
            "pages": len(self.read.pages),
            "image_count": self.read.image_count,
        }

    def __repr__(self) -> str:
        return f"PendingFile({self.input_name!r}, {self.name!r}, {len(self.data)} bytes)"


class TooManyUploads(InputsInvalid):
    """The user has uploaded RUN_FILE_UPLOADS_PER_MINUTE files this minute already.

    Inputs refused for now: whatever starts runs and answers InputsInvalid refuses these too
    (recipe tests, webhooks, schedules); the API and the run form answer them 429.
    """

    def __init__(self, retry_after: int) -> None:
        limit = settings.RUN_FILE_UPLOADS_PER_MINUTE
        super().__init__(
            [
                f"inputs: at most {limit} files may be uploaded a minute; try again in {retry_after} s"
            ]
        )
        self.retry_after = retry_after


def upload_of(uploaded: UploadedFile, limit: int | None = None) -> Upload:
    """A file Django received (the API, the run form) as an Upload: read no further than
    `limit` (RUN_FILE_MAX_BYTES) and one byte (a larger one is refused, and need not be read to
    its end). Its name is the one the client sent when the parser kept it (`client_name`)."""
    uploaded.seek(0)
    data = uploaded.read((int(settings.RUN_FILE_MAX_BYTES) if limit is None else limit) + 1)
    name = getattr(uploaded, "client_name", None) or uploaded.name or ""
    return Upload(name, data, uploaded.content_type, getattr(uploaded, "counted", False))


# --------------------------------------------------------------------------------------------
# Checking uploads


def max_bytes(spec: Mapping[str, Any]) -> int:
    """The largest file an input takes: its `max_bytes`, never over RUN_FILE_MAX_BYTES."""
    limit = int(settings.RUN_FILE_MAX_BYTES)
    return min(limit, spec["max_bytes"]) if spec.get("max_bytes") else limit


def upload_count(schema: Mapping[str, Mapping[str, Any]], inputs: object) -> int:
    """How many files `inputs` uploads (for the rate limit, before any is read), but those
    counted as the request bringing them was read (`runner.multipart`)."""
    if not isinstance(inputs, Mapping):
        return 0
    count = 0
    for name, spec in schema.items():
        if is_file_type(spec.get("type")) and inputs.get(name) is not None:
            value = inputs[name]
            values = value if isinstance(value, list) else [value]
            count += sum(not (isinstance(v, Upload) and v.counted) for v in values)
    return count


def take_uploads(
    schema: Mapping[str, Mapping[str, Any]], inputs: object
) -> tuple[Any, list[PendingFile]]:
    """Return `inputs` with each file input's uploads replaced by their refs, and the files to
    store with the run; raise InputsInvalid (`inputs.NAME: ...`) naming every upload refused.

    A file input's value must be uploads (an `Upload`, or base64 in JSON): a ref made by a
    client would point at another run's file.
    """
    if not isinstance(inputs, Mapping):
        return inputs, []  # check_inputs says what is wrong with it
    with_refs = dict(inputs)
    pending: list[PendingFile] = []
    errors: list[str] = []
    for name, spec in schema.items():
        kind = spec.get("type")
        if not is_file_type(kind) or inputs.get(name) is None:
            continue
        value = inputs[name]
        if kind == FILE and isinstance(value, list):
            if len(value) != 1:
                errors.append(f"inputs.{name}: takes one file; for several, its type is files")
                continue
            value = value[0]
        values = value if isinstance(value, list) else [value]
        if kind == FILES:
            most = spec.get("max_files", DEFAULT_MAX_FILES)
            if len(values) > most:
                errors.append(f"inputs.{name}: takes at most {most} files; {len(values)} given")
                continue
        taken: list[PendingFile] = []
        for position, item in enumerate(values):
            path = f"inputs.{name}" if kind == FILE else f"inputs.{name}[{position}]"
            try:
                taken.append(_take(name, position, spec, item))
            except _Refused as exc:
                errors.append(f"{path}: {exc}")
        if len(taken) == len(values):
            pending += taken
            refs = [file.ref() for file in taken]
            with_refs[name] = refs if kind == FILES else refs[0]
    if errors:
        raise InputsInvalid(errors)
    return with_refs, pending


class _Refused(Exception):
    """An upload refused; the message says why."""


def _take(name: str, position: int, spec: Mapping[str, Any], value: object) -> PendingFile:
    upload = _as_upload(value)
    if problem := name_problem(upload.filename):
        raise _Refused(problem)
    limit = max_bytes(spec)
    if len(upload.data) > limit:
        # Not its size: a large upload is read no further than the limit.
        raise _Refused(f"{upload.filename} is over {limit:,} bytes, the most this input takes")
    try:
        _, media_type = sniff_format(upload.filename, upload.data, upload.content_type)
        if not accepts(spec.get("accept"), media_type):
            raise _Refused(
                f"{upload.filename} is {media_type}; this input takes "
                f"{describe_accept(spec.get('accept'))}"
            )
        read = read_document(upload.filename, upload.data, upload.content_type)
    except ConversionError as exc:
        raise _Refused(f"{upload.filename}: {exc}") from None
    return PendingFile(uuid.uuid4(), name, position, upload.filename, upload.data, read)


def _as_upload(value: object) -> Upload:
    if isinstance(value, Upload):
        return value
    if isinstance(value, Mapping) and BASE64_FIELD in value:
        filename, content, media_type = (
            value.get("name"),
            value.get(BASE64_FIELD),
            value.get("media_type"),
        )
        if not isinstance(filename, str) or not isinstance(content, str):
            raise _Refused(f"name and {BASE64_FIELD} must be strings")
        if media_type is not None and not isinstance(media_type, str):
            raise _Refused("media_type must be a string")
        if extra := sorted(set(value) - {"name", BASE64_FIELD, "media_type"}):
            raise _Refused(f"unknown field {', '.join(extra)} (name, {BASE64_FIELD}, media_type)")
        try:
            # Line-wrapped base64 (`base64 file.pdf` writes 76 columns) is base64 still; any
            # other character than the alphabet and ASCII whitespace is refused.
            data = base64.b64decode(_ASCII_WHITESPACE.sub("", content), validate=True)
        except (binascii.Error, ValueError):
            raise _Refused(f"{BASE64_FIELD} is not valid base64") from None
        return Upload(filename, data, media_type)
    raise _Refused(UPLOAD_HINT)


def name_problem(filename: str) -> str | None:
    """Why a file's name as uploaded is refused (not cleaned: a name with a path in it is a
    client's mistake, or an attack), or None."""
    if not filename or not filename.strip():
        return "the file has no name"
    if len(filename) > NAME_MAX_CHARS:
        return f"the file's name is over {NAME_MAX_CHARS} characters"
    if "/" in filename or "\\" in filename or filename in (".", ".."):
        return "the file's name may not hold a path (/ or \\)"
    if any(unicodedata.category(char) in ("Cc", "Cf", "Cs") for char in filename):
        return "the file's name may not hold control characters (NUL, newlines...)"
    return None


# --------------------------------------------------------------------------------------------
# The rate limit


def take_upload_slots(user: AbstractBaseUser, count: int) -> None:
    """Count `count` uploads against the user's limit; raise TooManyUploads when it is used up.
    One counter per user and minute, shared by every process through the cache."""
    if count <= 0:
        return
    now = time.time()
    key = f"run-file-uploads:{user.pk}:{int(now // RATE_WINDOW_SECONDS)}"
    try:
        cache.add(key, 0, timeout=RATE_WINDOW_SECONDS * 2)
        used = cache.incr(key, count)
    except (*BROKER_ERRORS, ValueError):
        # Redis is away (or dropped the key between the calls): not worth refusing a run for.
        log.warning("run file uploads not counted for user %s", user.pk, exc_info=True)
        return
    if used > settings.RUN_FILE_UPLOADS_PER_MINUTE:
        raise TooManyUploads(max(1, math.ceil(RATE_WINDOW_SECONDS - now % RATE_WINDOW_SECONDS)))


# --------------------------------------------------------------------------------------------
# Storing and serving


def _storage() -> Storage:
    return RunFile._meta.get_field("blob").storage  # type: ignore[attr-defined, no-any-return]


def attach(run_id: int, pending: list[PendingFile], written: list[str]) -> list[RunFile]:
    """Store the files of a run just inserted, in its transaction: their blobs (each name added
    to `written` once saved), and their rows. Callers go through `storing`."""
    rows = []
    for file in pending:
        blob = _storage().save(run_file_path(run_id, file.id), ContentFile(file.data))
        written.append(blob)
        rows.append(
            RunFile(
                id=file.id,
                run_id=run_id,
                input_name=file.input_name,
                position=file.position,
                name=file.name,
                media_type=file.read.media_type,
                size=len(file.data),
                sha256=hashlib.sha256(file.data).hexdigest(),
                blob=blob,
                text=file.read.text,
                pages=file.read.pages,
                image_count=file.read.image_count,
                width=file.read.width,
                height=file.read.height,
            )
        )
    return RunFile.objects.bulk_create(rows) if rows else []


@contextmanager
def storing() -> Iterator[Callable[[int, list[PendingFile]], list[RunFile]]]:
    """Yield `keep(run_id, pending)`, which stores a run's files; if anything in the block
    fails, the blobs it wrote are deleted again. Enter it before the run's transaction:
    `with storing() as keep, transaction.atomic(): ...`, so a rollback leaves no blob."""
    written: list[str] = []
    try:
        yield lambda run_id, pending: attach(run_id, pending, written)
    except BaseException:
        for name in written:
            _delete_blob(name)
        raise


def copies_for(run_id: int, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], list[PendingFile]]:
    """Return `inputs` with the refs to run `run_id`'s files replaced by refs to copies of them
    (a fork owns its files: deleting its parent keeps them), and the copies to `attach`."""
    stored = {str(f.id): f for f in RunFile.objects.filter(run_id=run_id)}
    copied = dict(inputs)
    pending: list[PendingFile] = []
    for name, value in inputs.items():
        refs = value if isinstance(value, list) else [value]
        if not refs or not all(
            isinstance(r, Mapping)
            and r.get("file") in stored
            and stored[r["file"]].input_name == name  # the file given to this very input
            for r in refs
        ):
            continue
        new_refs = []
        for position, ref in enumerate(refs):
            original = stored[ref["file"]]
            with original.blob.open("rb") as blob:
                data = blob.read()
            read = DocumentRead(
                format="",
                media_type=original.media_type,
                text=original.text,
                pages=list(original.pages),
                image_count=original.image_count,
                width=original.width,
                height=original.height,
            )
            copy = PendingFile(uuid.uuid4(), name, position, original.name, data, read)
            pending.append(copy)
            new_refs.append(copy.ref())
        copied[name] = new_refs if isinstance(value, list) else new_refs[0]
    return copied, pending


def _delete_blob(name: str) -> None:
    try:
        _storage().delete(name)
    except OSError:
        log.warning("run file %s not deleted", name, exc_info=True)


@receiver(post_delete, sender=RunFile, dispatch_uid="run-file-blob-deleted")
def _blob_deleted_with_row(sender: type[RunFile], instance: RunFile, **kwargs: Any) -> None:
    # Once the row is gone for good: a deletion rolled back keeps the file it points at.
    if instance.blob.name:
        name = instance.blob.name
        transaction.on_commit(lambda: _delete_blob(name))


def file_response(run_file: RunFile) -> FileResponse:
    """The file's bytes to download: always an attachment, never sniffed into another type."""
    media_type = run_file.media_type if run_file.media_type in SERVED_AS_IS else None
    response = FileResponse(
        run_file.blob.open("rb"),
        as_attachment=True,
        filename=run_file.name,
        content_type=media_type or "application/octet-stream",
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response


def files_of_run(run_id: int) -> dict[str, list[RunFile]]:
    """The run's stored files by input name, each input's in order (without their bytes)."""
    found: dict[str, list[RunFile]] = defaultdict(list)
    for run_file in RunFile.objects.filter(run_id=run_id).order_by("input_name", "position"):
        found[run_file.input_name].append(run_file)
    return dict(found)
