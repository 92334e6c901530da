"""Parsers that answer every malformed body with a 4xx, never a server error.

They also refuse text the database cannot hold (NUL, lone surrogates) wherever it sits in a
body, with its path: the one rule of `workflows.validators.text_problem`.
"""

from __future__ import annotations

import codecs
from typing import Any

from django.conf import settings
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError

from ..engine import strict_json
from ..validators import fields_errors, json_value_errors
from .errors import InputRefused


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


class JSONParser(parsers.JSONParser):
    """Parse JSON like DRF, but refuse what DRF lets through to a server error.

    DRF reads the whole stream whatever DATA_UPLOAD_MAX_MEMORY_SIZE says, raises
    RecursionError on deeply nested arrays, and turns 1e400 into infinity.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            text = codecs.decode(raw, encoding)
            data = strict_json(text)
        except (ValueError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply") from None
        if errors := json_value_errors(data):
            raise InputRefused(errors)
        return data


class FormParser(parsers.FormParser):
    """Parse a urlencoded form like DRF, refusing fields the database cannot hold."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        if errors := fields_errors(data):
            raise InputRefused(errors)
        return data


class MultiPartParser(parsers.MultiPartParser):
    """Parse a multipart form like DRF, refusing fields the database cannot hold (an uploaded
    file's content is checked by whoever reads it, e.g. the recipe import)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        if errors := fields_errors(parsed.data):
            raise InputRefused(errors)
        return parsed
