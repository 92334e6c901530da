"""Limit/offset pagination that refuses bad parameters instead of guessing.

DRF's LimitOffsetPagination ignores a `limit` it cannot read, counts a negative one as the
default, and hands a huge `offset` to the database (a 500 on SQLite and PostgreSQL alike).
Here each is a 400 naming the parameter, and the schema states the bounds.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from ..validators import whole_number

MAX_LIMIT = 200
# Far past any list's length, and far inside the 64-bit integers that SQL's OFFSET takes.
MAX_OFFSET = 1_000_000_000


class Pagination(LimitOffsetPagination):
    """The API's pagination (DEFAULT_PAGINATION_CLASS): `limit` from 1 to 200, `offset` from 0."""

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int:
        return _bounded(request, self.limit_query_param, self.default_limit, 1, MAX_LIMIT)

    def get_offset(self, request: Request) -> int:
        return _bounded(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update(minimum=1, maximum=MAX_LIMIT)
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update(minimum=0, maximum=MAX_OFFSET)
        return parameters


def _bounded(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    value = whole_number(text)
    if value is None or not low <= value <= high:
        raise ValidationError({name: f"a whole number from {low} to {high}"})
    return value


def window(queryset: QuerySet[Any], request: Request, *, default_limit: int) -> QuerySet[Any]:
    """Return the part of `queryset` that the request's `limit` and `offset` ask for.

    For the lists the API returns bare (runs, tasks, recipes): the same parameters and checks
    as `Pagination`, without its envelope or its count query.
    """
    limit = _bounded(request, "limit", default_limit, 1, MAX_LIMIT)
    offset = _bounded(request, "offset", 0, 0, MAX_OFFSET)
    return queryset[offset : offset + limit]


def window_parameters(default_limit: int) -> list[OpenApiParameter]:
    """Describe `window`'s query parameters for the schema."""
    return [
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": default_limit},
            description="the number of items to return",
        ),
        OpenApiParameter(
            "offset",
            {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "default": 0},
            description="the number of items to skip",
        ),
    ]
