"""Pagination that refuses bad parameters instead of guessing: limit/offset, and keyset cursors.

DRF's LimitOffsetPagination ignores a `limit` it cannot read, counts a negative one as the
default, and hands a huge `offset` to the database (a 500 on SQLite and PostgreSQL alike).
Here each is a 400 naming the parameter, and the schema states the bounds.

The lists that grow without bound (runs, tasks, events, recipes) page by keyset: a page starts
after the ordering key of the last item of the page before, not at a position, so rows inserted
between two requests move no existing row across a page edge, and a walk page by page meets
every row that existed exactly once. Their bodies stay bare arrays (DESIGN.md §5); the next page
is in a `Link: <url>; rel="next"` header (RFC 8288), as in GitHub's API.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import CharField, DateTimeField, F, Field, IntegerField, QuerySet, TextField
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan, TupleLessThan
from django.http import HttpRequest, QueryDict
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from ..validators import text_problem, whole_number

MAX_LIMIT = 200
# Far past any list's length, and far inside the 64-bit integers that SQL's OFFSET takes.
MAX_OFFSET = 1_000_000_000


class Pagination(LimitOffsetPagination):
    """The API's pagination (DEFAULT_PAGINATION_CLASS): `limit` from 1 to 200, `offset` from 0."""

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int:
        return bounded(request, self.limit_query_param, self.default_limit, 1, MAX_LIMIT)

    def get_offset(self, request: Request) -> int:
        return bounded(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update(minimum=1, maximum=MAX_LIMIT)
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update(minimum=0, maximum=MAX_OFFSET)
        return parameters


def bounded(request: Request, name: str, default: int, low: int, high: int) -> int:
    """Return the whole number the query parameter `name` holds, `default` without it; a 400
    naming it unless it is from `low` to `high`."""
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
    limit = bounded(request, "limit", default_limit, 1, MAX_LIMIT)
    offset = bounded(request, "offset", 0, 0, MAX_OFFSET)
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


# --- keyset (cursor) pagination ---------------------------------------------------------------

# The largest whole number a key holds: what `whole_number` reads (18 digits), inside a bigint.
# (Not imported from .schema, which DRF's settings load while they import this module.)
MAX_KEY_NUMBER = 10**18 - 1
# A cursor longer than this is no cursor a list gave (a 200-character name, in UTF-8 and base64).
MAX_CURSOR_LENGTH = 2048
CURSOR_ERROR = "not a cursor of this list: follow the URL in the Link header (rel=next)"

Key = tuple[Any, ...]


class CursorInvalid(ValueError):
    """A cursor that no page of the list gave."""


@dataclass(frozen=True)
class KeysetPage:
    """Up to `limit` items, and the key to read the next page after (None: the last page)."""

    items: list[Any]
    next_key: Key | None


class Keyset:
    """A queryset's order read as a key, the pk last so that no two rows share one.

    The order is the queryset's own (`order_by`, else the model's `ordering`) with the pk added,
    in the direction of its last field, unless it ends with it; or `order`, for a list whose
    last field is unique already (a run's events, by `seq`).
    """

    def __init__(self, queryset: QuerySet[Any], order: Sequence[str] | None = None) -> None:
        self.queryset = queryset
        self.order = tuple(order or _order_with_pk(queryset))
        self.names = [name.removeprefix("-") for name in self.order]
        # One row comparison reads the whole key: every field goes the same way.
        if len({name.startswith("-") for name in self.order}) != 1:
            raise TypeError(f"keyset pagination orders every field one way, not {self.order}")
        meta = queryset.model._meta
        self.fields = [
            meta.pk if n in ("pk", meta.pk.name) else meta.get_field(n) for n in self.names
        ]

    def page(self, *, after: Key | None, limit: int, offset: int = 0) -> KeysetPage:
        """Return the `limit` items that follow `after` (None: the first), `offset` skipped."""
        rows = self.queryset.order_by(*self.order)
        if after is not None:
            rows = rows.filter(self._after(after))
        # One row more than asked says whether a next page exists, without counting.
        items = list(rows[offset : offset + limit + 1])
        if len(items) <= limit:
            return KeysetPage(items, None)
        del items[limit:]
        return KeysetPage(items, self.key(items[-1]))

    def key(self, item: Any) -> Key:
        return tuple(getattr(item, name) for name in self.names)

    def cursor(self, key: Key) -> str:
        """Return `key` as an opaque cursor: a JSON array in URL-safe base64."""
        values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
        text = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode("ascii").rstrip("=")

    def position(self, cursor: str | None) -> Key | None:
        """Return the key a cursor holds (None: no cursor); raise CursorInvalid for any text
        that `cursor` did not make for a list of this order."""
        if cursor is None:
            return None
        if not 0 < len(cursor) <= MAX_CURSOR_LENGTH or not cursor.isascii():
            raise CursorInvalid(cursor)
        padded = cursor + "=" * (-len(cursor) % 4)
        try:
            values = json.loads(base64.b64decode(padded, altchars=b"-_", validate=True).decode())
        # binascii.Error and UnicodeDecodeError are ValueErrors; "[[[[…" nests too deep.
        except (ValueError, RecursionError) as exc:
            raise CursorInvalid(cursor) from exc
        if not isinstance(values, list) or len(values) != len(self.fields):
            raise CursorInvalid(cursor)
        return tuple(_key_value(f, v, cursor) for f, v in zip(self.fields, values, strict=True))

    def _after(self, key: Key) -> TupleLessThan | TupleGreaterThan:
        """Return "the row's key comes after `key`" in the key's order: a row comparison,
        `(created_at, id) < (%s, %s)`, which an index on the key's columns answers with one
        range scan (PostgreSQL and SQLite alike)."""
        columns = Tuple(*(F(name) for name in self.names))
        descending = self.order[0].startswith("-")
        return (TupleLessThan if descending else TupleGreaterThan)(columns, key)


def _order_with_pk(queryset: QuerySet[Any]) -> list[str]:
    meta = queryset.model._meta
    order = list(queryset.query.order_by or meta.ordering)
    for name in order:
        if not isinstance(name, str) or "__" in name or name == "?":
            raise TypeError(f"keyset pagination orders by plain fields, not {name!r}")
    if not order:
        return ["pk"]
    if order[-1].removeprefix("-") not in ("pk", meta.pk.name):
        order.append("-pk" if order[-1].startswith("-") else "pk")
    return order


def _key_value(field: Field[Any, Any], value: Any, cursor: str) -> Any:
    """Return one value of a cursor's key as `field` holds it, or raise CursorInvalid."""
    if isinstance(field, DateTimeField):
        # In UTC here: a moment near year 1 or 9999 in another zone may not be one in UTC.
        try:
            moment = datetime.fromisoformat(value) if isinstance(value, str) else None
            if moment is not None and moment.tzinfo is not None:
                return moment.astimezone(UTC)
        except (ValueError, OverflowError):
            pass
    elif isinstance(field, IntegerField):
        # Within what a bigint holds: a larger number makes the database fail, not answer.
        if type(value) is int and 0 <= value <= MAX_KEY_NUMBER:
            return value
    elif isinstance(field, CharField | TextField):
        if isinstance(value, str) and text_problem(value) is None:
            return value
    else:
        raise TypeError(f"keyset pagination reads no {type(field).__name__}")
    raise CursorInvalid(cursor)


def query_with(params: QueryDict, **changes: str | None) -> str:
    """Return `params` as a query string with `changes` made (None: left out) and `offset`
    dropped (a cursor says where a page starts)."""
    query = params.copy()
    query.pop("offset", None)
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return query.urlencode()


def next_link(request: HttpRequest | Request, **changes: str | None) -> str:
    """Return a `Link` header to the next page: this URL with its filters and `limit`, and
    `changes`."""
    query = query_with(request.GET, **changes)
    return f'<{request.build_absolute_uri(f"{request.path}?{query}")}>; rel="next"'


@dataclass(frozen=True)
class ListPage:
    """A page of a list the API returns bare, and the headers that say what else there is."""

    items: list[Any]
    headers: dict[str, str]


def cursor_page(
    queryset: QuerySet[Any], request: Request, *, default_limit: int, count: bool = False
) -> ListPage:
    """Return the page of `queryset` that the request's `cursor`, `limit` and `offset` ask for.

    `offset` skips items after the cursor (or from the start), as before cursors existed.
    `Link` names the next page; `X-Total-Count`, with `count`, the length of the whole list.
    """
    limit = bounded(request, "limit", default_limit, 1, MAX_LIMIT)
    offset = bounded(request, "offset", 0, 0, MAX_OFFSET)
    keyset = Keyset(queryset)
    try:
        after = keyset.position(request.query_params.get("cursor"))
    except CursorInvalid:
        raise ValidationError({"cursor": CURSOR_ERROR}) from None
    page = keyset.page(after=after, limit=limit, offset=offset)
    headers = {}
    if page.next_key is not None:
        headers["Link"] = next_link(request, cursor=keyset.cursor(page.next_key))
    if count:
        headers["X-Total-Count"] = str(queryset.count())
    return ListPage(page.items, headers)


def link_header(position: str = "cursor") -> OpenApiParameter:
    """Describe the `Link` response header of a list whose pages start at `position`."""
    return OpenApiParameter(
        "Link",
        str,
        OpenApiParameter.HEADER,
        response=[200],
        description='`<URL>; rel="next"`: the next page (the same filters and `limit`, and '
        f"the `{position}` it starts at); absent on the last page",
    )


TOTAL_COUNT_HEADER = OpenApiParameter(
    "X-Total-Count",
    int,
    OpenApiParameter.HEADER,
    response=[200],
    description="the number of items in the whole list (every page), with its filters",
)


def cursor_parameters(default_limit: int) -> list[OpenApiParameter]:
    """Describe `cursor_page`'s query parameters and response headers for the schema."""
    return [
        OpenApiParameter(
            "cursor",
            {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]+$",
                "minLength": 1,
                "maxLength": MAX_CURSOR_LENGTH,
            },
            description="where the page starts: the cursor in the previous page's `Link` "
            "header (rel=next); pages read this way neither repeat nor skip an item when "
            "items are added meanwhile",
        ),
        *window_parameters(default_limit),
        link_header(),
    ]


@dataclass(frozen=True)
class PageOfList:
    """A page of a list on an HTML page, and the query strings of the pages around it."""

    items: list[Any]
    next_query: str | None
    first_query: str | None  # None on the first page
    bad_cursor: bool = False  # the cursor named no place in the list: no items, a first link

    @property
    def has_other_pages(self) -> bool:
        return self.next_query is not None or self.first_query is not None


def keyset_window(queryset: QuerySet[Any], params: QueryDict, *, per_page: int) -> PageOfList:
    """Return the page of `queryset` that `params`' `cursor` names (`bad_cursor` when it names
    none: the page then says so, with 400, and links to the first page).

    The links keep the page's other parameters (its filters); `page`, the number of the
    paginators before cursors, is dropped.
    """
    keyset = Keyset(queryset)
    try:
        after = keyset.position(params.get("cursor"))
    except CursorInvalid:
        return PageOfList([], None, query_with(params, cursor=None, page=None), bad_cursor=True)
    page = keyset.page(after=after, limit=per_page)
    return PageOfList(
        page.items,
        next_query=None
        if page.next_key is None
        else query_with(params, cursor=keyset.cursor(page.next_key), page=None),
        first_query=None if after is None else query_with(params, cursor=None, page=None),
    )
