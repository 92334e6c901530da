"""Files in the runs API: a run started with uploads (multipart/form-data), and a run's files
downloaded (to those who may see the run; anyone else gets a 404, as for the run itself)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import FileResponse
from django.http.multipartparser import MultiPartParserError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.parsers import DataAndFiles
from rest_framework.request import Request
from rest_framework.views import APIView

from workflows.apis.errors import InputRefused
from workflows.apis.parsers import MultiPartParser
from workflows.engine import strict_json
from workflows.engine.files import DEFAULT_MAX_FILES, FILES
from workflows.models import Recipe
from workflows.validators import fields_errors, json_value_errors

from . import multipart, selectors, services
from .inputs import coerce_cli_value
from .models import RunFile
from .run_files import SERVED_AS_IS, file_response, max_bytes, upload_of

MULTIPART = "multipart/form-data"
# The fields of a multipart run start that are not inputs.
START_FIELDS = ("inputs", "script", "version", "classification")


class RunFilesParser(MultiPartParser):
    """The API's multipart parser, with each uploaded file's name as sent in `client_name`."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        context = parser_context or {}
        request = context["request"]
        meta = request.META.copy()
        meta["CONTENT_TYPE"] = media_type
        encoding = context.get("encoding", settings.DEFAULT_CHARSET)
        if (most := _most_read()) is not None and _content_length(meta) > most:
            raise RequestRefused(multipart.too_large())  # refused before any of it is read
        try:
            data, files, refused = multipart.parse_run_upload(
                meta,
                stream,
                request.upload_handlers,
                encoding,
                # Django's request: DRF's own may be authenticating (its CSRF check parses).
                user=getattr(request._request, "user", None),
                bounds={},  # the version the run starts on is known once the fields are read
            )
        except MultiPartParserError as exc:
            raise ParseError(f"Multipart form parse error - {exc}") from None
        if refused is not None:
            raise RequestRefused(refused)
        if errors := fields_errors(data):
            raise InputRefused(errors)
        return DataAndFiles(data, files)


def _content_length(meta: dict[str, Any]) -> int:
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0  # the parser refuses it


def _most_read() -> int | None:
    """The longest multipart body read: its files' bound and its other fields' (Django's)."""
    fields = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return None if fields is None else int(settings.RUN_UPLOAD_MAX_BYTES) + fields


class RequestRefused(APIException):
    """A multipart run start refused while it is read: 413 (too large), 429 (too many files
    this minute, with Retry-After)."""

    def __init__(self, refused: multipart.UploadRefused) -> None:
        super().__init__(str(refused))
        self.status_code = refused.status
        self.errors = [str(refused)]
        self.wait = refused.retry_after


def multipart_start(request: Request, recipe: Recipe) -> dict[str, Any]:
    """The run start a multipart form asks for, as the JSON body would give it, its files
    as Uploads in `inputs`."""
    form = request.data
    asked: dict[str, Any] = {}
    for field in ("script", "inputs"):
        raw = form.get(field)
        if raw in (None, ""):
            continue
        try:
            asked[field] = strict_json(raw)
        except (ValueError, RecursionError):
            raise ValidationError({field: "must be JSON"}) from None
        if errors := json_value_errors(asked[field], at=field):
            raise InputRefused(errors)
    for field in ("version", "classification"):
        if form.get(field) not in (None, ""):
            asked[field] = form.get(field)
    inputs = asked.get("inputs", {})
    if not isinstance(inputs, dict):
        raise ValidationError({"inputs": "must be a JSON object of name: value"})
    schema = services.input_schema(recipe, _version(asked.get("version")))
    files = request.FILES
    for name in form:
        if name in START_FIELDS or name in files:
            continue
        inputs[name] = coerce_cli_value(schema.get(name, {}), form.get(name))
    for name in files:
        spec = schema.get(name, {})
        several = spec.get("type") == FILES
        # Read no more than the input takes: past its count, a file is refused unread.
        most = spec.get("max_files", DEFAULT_MAX_FILES) if several else 1
        limit = max_bytes(spec)
        uploads = [
            upload_of(uploaded, limit if position < most else 0)
            for position, uploaded in enumerate(files.getlist(name))
        ]
        inputs[name] = uploads if several or len(uploads) > 1 else uploads[0]
    asked["inputs"] = inputs
    return asked


def _version(raw: object) -> int | None:
    try:
        return int(str(raw)) if raw not in (None, "") else None
    except ValueError:
        return None  # the serializer refuses it


class RunFileOutput(serializers.ModelSerializer):
    pages = serializers.SerializerMethodField(help_text="how many pages were read from it")

    class Meta:
        model = RunFile
        fields = [
            "id",
            "input_name",
            "position",
            "name",
            "media_type",
            "size",
            "sha256",
            "pages",
            "image_count",
            "width",
            "height",
            "created_at",
        ]

    def get_pages(self, run_file: RunFile) -> int:
        return len(run_file.pages or [])


class RunFileApi(APIView):
    @extend_schema(
        responses={
            (200, "application/octet-stream", *sorted(SERVED_AS_IS)): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="the file's bytes, as an attachment (a PDF or an image with its own "
                "type; any other as application/octet-stream)",
            )
        }
    )
    def get(self, request: Request, run_id: int, file_id: str) -> FileResponse:
        """Download one of a run's files."""
        return file_response(
            selectors.run_file_get(user=request.user, run_id=run_id, file_id=file_id)
        )
