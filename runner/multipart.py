"""Multipart requests that upload files to runs (the API, the run form, the editor's test run),
read with bounds: the request's files together at most RUN_UPLOAD_MAX_BYTES, each file kept to
the most its input takes, each file counted against the user's upload rate as it begins (before
its bytes are read), and each file's name kept as the client sent it (so that a name with a
path or a control character is refused, as the API refuses it, rather than cleaned).

A request refused while it is read is not read further: `UploadRefused` says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import BadRequest
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, QueryDict
from django.http.multipartparser import MultiPartParser
from django.utils.datastructures import MultiValueDict
from django.views.decorators.csrf import csrf_exempt

from workflows.engine.files import DEFAULT_MAX_FILES, FILES, is_file_type
from workflows.validators import fields_errors

from .run_files import TooManyUploads, max_bytes, take_upload_slots

# Per form field: the bytes kept of each file, and how many of its files are kept (the others
# are refused by their count, unread).
Bounds = Mapping[str, tuple[int, int]]
View = TypeVar("View", bound=Callable[..., Any])
# The mark of a view that reads its own multipart body (`reads_its_own_upload`).
READS_ITS_OWN_UPLOAD = "reads_its_own_upload"


class UploadRefused(Exception):
    """A multipart request refused before it was read to its end: too large (413), or more
    files than the user may upload this minute (429, `retry_after` seconds)."""

    def __init__(self, message: str, status: int, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def file_bounds(
    schema: Mapping[str, Mapping[str, Any]], prefix: str = ""
) -> dict[str, tuple[int, int]]:
    """The bounds of the file inputs of `schema`, by form field (`prefix` + input name)."""
    bounds: dict[str, tuple[int, int]] = {}
    for name, spec in schema.items():
        if is_file_type(spec.get("type")):
            most = spec.get("max_files", DEFAULT_MAX_FILES) if spec["type"] == FILES else 1
            bounds[prefix + name] = (max_bytes(spec), most)
    return bounds


def too_large() -> UploadRefused:
    most = int(settings.RUN_UPLOAD_MAX_BYTES)
    return UploadRefused(
        f"inputs: the files of one request are at most {most:,} bytes together "
        "(RUN_UPLOAD_MAX_BYTES); send fewer or smaller files",
        status=413,
    )


class _ClientNamesKept(MultiPartParser):
    """Django's multipart parser, keeping each file's name as the client sent it.

    Django cuts a name to its last path part and drops characters it cannot print; a name with
    a path or a NUL in it is refused instead (`run_files.name_problem`), so it must be seen.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client_names: dict[str, str] = {}

    def sanitize_file_name(self, file_name: str) -> str | None:
        # A stand-in Django can keep as it likes; the name sent is looked up by it afterwards.
        stand_in = f"upload-{len(self.client_names)}"
        self.client_names[stand_in] = file_name
        return stand_in


class _Bounded(FileUploadHandler):
    """First of the parser's handlers: counts and cuts what the others receive, and stops the
    upload (not reading the rest of the body) once it is refused."""

    def __init__(self, user: AbstractBaseUser | AnonymousUser | None, bounds: Bounds) -> None:
        super().__init__(None)
        self.user = user
        self.bounds = bounds
        self.most = int(settings.RUN_UPLOAD_MAX_BYTES)
        self.total = 0
        self.files_of: Counter[str] = Counter()
        self.keep = 0
        self.refused: UploadRefused | None = None

    def new_file(self, field_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, *args, **kwargs)
        if self.user is not None and self.user.is_authenticated:
            try:
                take_upload_slots(self.user, 1)  # type: ignore[arg-type]
            except TooManyUploads as exc:
                self.refused = UploadRefused(str(exc), status=429, retry_after=exc.retry_after)
                raise StopUpload(connection_reset=True) from None
        size, count = self.bounds.get(field_name, (int(settings.RUN_FILE_MAX_BYTES), 0))
        self.files_of[field_name] += 1
        # A byte more than the input takes: enough to refuse it as too large, unread beyond.
        self.keep = 0 if count and self.files_of[field_name] > count else size + 1

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.total += len(raw_data)
        if self.total > self.most:
            self.refused = too_large()
            raise StopUpload(connection_reset=True)
        if start >= self.keep:
            return None  # the other handlers keep nothing of it
        return raw_data[: self.keep - start]

    def file_complete(self, file_size: int) -> None:
        return None


def parse_run_upload(
    meta: Mapping[str, Any],
    stream: Any,
    handlers: list[FileUploadHandler],
    encoding: str,
    *,
    user: AbstractBaseUser | AnonymousUser | None,
    bounds: Bounds,
) -> tuple[QueryDict, MultiValueDict[str, Any], UploadRefused | None]:
    """Parse a multipart body with `bounds`; return its fields, its files (each with the name
    sent in `client_name`, and `counted` against the rate), and why it was refused, if it was
    (then the fields and files are those read before)."""
    bounded = _Bounded(user, bounds)
    parser = _ClientNamesKept(meta, stream, [bounded, *handlers], encoding)
    data, files = parser.parse()
    for _, uploads in files.lists():
        for uploaded in uploads:
            uploaded.client_name = parser.client_names.get(uploaded.name, uploaded.name)
            uploaded.counted = True
    return data, files, bounded.refused


class RunUploadHandler(FileUploadHandler):
    """The upload handler of a view that takes files for a run: it parses the body itself
    (`parse_run_upload`), with the view's request's other handlers. Put in place by
    `bound_uploads`, before anything reads the body (the view must check CSRF after it)."""

    def __init__(self, request: HttpRequest, bounds: Bounds) -> None:
        super().__init__(request)
        self.bounds = bounds
        self.refused: UploadRefused | None = None

    def handle_raw_input(
        self,
        input_data: Any,
        META: dict[str, Any],  # Django names it so
        content_length: int,
        boundary: bytes,
        encoding: str | None = None,
    ) -> tuple[QueryDict, MultiValueDict[str, Any]]:
        assert self.request is not None
        others = [h for h in self.request.upload_handlers if h is not self]
        data, files, self.refused = parse_run_upload(
            META,
            input_data,
            others,
            encoding or settings.DEFAULT_CHARSET,
            user=getattr(self.request, "user", None),
            bounds=self.bounds,
        )
        return data, files

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        return raw_data  # never called: the body is parsed in handle_raw_input

    def file_complete(self, file_size: int) -> None:
        return None


def bound_uploads(request: HttpRequest, bounds: Bounds) -> RunUploadHandler:
    """Put the run upload handler first on `request` (before its body is read) and return it:
    its `refused` says, once the body is read, why the request was refused."""
    handler = RunUploadHandler(request, bounds)
    if request.content_type == "multipart/form-data":
        # Any other body has no files, and the door has read it already (a urlencoded form).
        request.upload_handlers = [handler, *request.upload_handlers]
    return handler


def reads_its_own_upload(view: View) -> View:
    """Mark a page view that takes files for a run (the outermost decorator): it reads its
    multipart body itself, with `bound_uploads` in place first. So neither the door
    (`config.middleware`, which checks a page's form fields) nor the CSRF middleware read it
    before: the view checks CSRF once the handler is in place (an inner `csrf_protect`) and
    the fields with `posted_fields_checked`."""
    exempt = csrf_exempt(view)
    setattr(exempt, READS_ITS_OWN_UPLOAD, True)
    return exempt  # type: ignore[return-value]


class UnstorableFields(BadRequest):
    """A form field the database cannot hold, in a page that reads its own upload: answered as
    the door answers it for the others (`config.middleware`), naming the fields."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def posted_fields_checked(request: HttpRequest) -> None:
    """Refuse (400) a form field the database cannot hold, as the door does for other pages."""
    if request.method == "POST" and (errors := fields_errors(request.POST)):
        raise UnstorableFields(errors)
