"""One JSON error shape for the API: `{"errors": ["path: message", ...]}` (plus DRF's `detail`).

Errors that DRF does not answer (server errors, outages, unknown addresses) get the same shape,
with the request's id, from config/middleware.py.
"""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.exceptions import (
    APIException,
    ParseError,
    UnsupportedMediaType,
    ValidationError,
)
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..services import ActorInUse, ActorInvalid, RecipeConflict
from ..validators import RecipeRejected


class InputRefused(APIException):
    """Input refused before a view reads it (e.g. by a parser); `errors` lists every
    `path: message`."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def flatten_errors(detail: Any, path: str = "") -> list[str]:
    """Turn DRF's nested error detail into `path: message` strings."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            sub = path if key == "non_field_errors" else (f"{path}.{key}" if path else str(key))
            out += flatten_errors(value, sub)
        return out
    if isinstance(detail, list):
        if all(not isinstance(d, dict | list) for d in detail):
            return [f"{path or '$'}: {d}" for d in detail]
        out = []
        for i, value in enumerate(detail):
            out += flatten_errors(value, f"{path}[{i}]")
        return out
    return [f"{path or '$'}: {detail}"]


def _users(exc: ProtectedError) -> str:
    """Say what holds a protected row, as "by 2 runs, 1 knowledge base"."""
    counts: dict[tuple[str, str], int] = {}
    for obj in exc.protected_objects:
        names = (str(obj._meta.verbose_name), str(obj._meta.verbose_name_plural))
        counts[names] = counts.get(names, 0) + 1
    parts = [f"{n} {plural if n > 1 else one}" for (one, plural), n in counts.items()]
    return "by " + ", ".join(parts)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Answer domain errors with a clear JSON body; leave the rest to DRF."""
    if isinstance(exc, RecipeRejected | InputRefused | ActorInvalid):
        return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RecipeConflict | ActorInUse):
        return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ProtectedError):
        return Response(
            {"errors": [f"$: it is still used ({_users(exc)}) and cannot be deleted"]},
            status=status.HTTP_409_CONFLICT,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(getattr(exc, "errors", None), list):
        # A refusal of any status that lists its errors (e.g. a run's upload, 413 or 429):
        # the one shape, DRF's headers (Retry-After) kept.
        response.data = {"errors": exc.errors}  # type: ignore[attr-defined]
        return response
    if response is not None and isinstance(exc, ValidationError):
        response.data = {"errors": flatten_errors(exc.detail)}
    elif response is not None and isinstance(exc, ParseError | UnsupportedMediaType):
        # Bad bodies are input errors like any other: the same shape, with DRF's detail kept.
        response.data = {"errors": [f"$: {exc.detail}"], "detail": exc.detail}
    return response
