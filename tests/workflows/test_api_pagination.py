"""`limit` and `offset` on every list, and every other number a request names, are checked:
a 400 naming the parameter (or a 404 for an id in the address), never a silent default or a 500.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from runner import services
from tests.conftest import api_client
from tests.factories import ActorFactory, recipe_document
from workflows.apis.pagination import MAX_LIMIT, MAX_OFFSET
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

LISTS = ["/api/recipes", "/api/runs/", "/api/tasks/", "/api/actors/"]

HUGE = "9" * 30
BAD_NUMBERS = [
    pytest.param("-1", id="negative"),
    pytest.param("abc", id="text"),
    pytest.param("", id="empty"),
    pytest.param("1.5", id="fraction"),
    pytest.param("1e3", id="exponent"),
    pytest.param("+5", id="plus sign"),
    pytest.param(" 5", id="leading space"),
    pytest.param("0x10", id="hex"),
    pytest.param("²", id="superscript digit"),
    pytest.param("\u0661\u0662", id="arabic-indic digits"),
    pytest.param("\uff15", id="fullwidth digit"),
    pytest.param(HUGE, id="huge"),
    pytest.param("9" * 5000, id="5000 digits"),
]
LIMIT_ERROR = f"limit: a whole number from 1 to {MAX_LIMIT}"
OFFSET_ERROR = f"offset: a whole number from 0 to {MAX_OFFSET}"


@pytest.fixture
def staff(staff_user: Any, actors: Any) -> APIClient:
    staff_user.groups.add(actors.reviewers)
    return api_client(staff_user, raise_errors=False)


@pytest.fixture
def recipes(staff_user: Any, actors: Any) -> list[Recipe]:
    made = []
    for slug in ("alpha", "bravo", "charlie"):
        doc = recipe_document(slug=slug, name=slug.title())
        made.append(recipe_import(user=staff_user, data=doc).recipe)
    return made


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize("url", LISTS)
def test_it_refuses_a_bad_limit_with_its_name(staff: APIClient, url: str, value: str) -> None:
    response = staff.get(url, {"limit": value})

    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [LIMIT_ERROR]}


@pytest.mark.parametrize("value", ["0", str(MAX_LIMIT + 1)])
@pytest.mark.parametrize("url", LISTS)
def test_it_refuses_a_limit_out_of_bounds(staff: APIClient, url: str, value: str) -> None:
    response = staff.get(url, {"limit": value})

    assert response.status_code == 400
    assert response.json() == {"errors": [LIMIT_ERROR]}


@pytest.mark.parametrize("value", [*BAD_NUMBERS, pytest.param(str(MAX_OFFSET + 1), id="past")])
@pytest.mark.parametrize("url", LISTS)
def test_it_refuses_a_bad_offset_with_its_name(staff: APIClient, url: str, value: str) -> None:
    response = staff.get(url, {"offset": value})

    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [OFFSET_ERROR]}


def rows(body: Any) -> list[Any]:
    return body["results"] if isinstance(body, dict) else body


@pytest.mark.parametrize("url", LISTS)
def test_the_bounds_themselves_are_accepted(staff: APIClient, url: str) -> None:
    first = staff.get(url, {"limit": str(MAX_LIMIT), "offset": "0"})
    last = staff.get(url, {"limit": "1", "offset": str(MAX_OFFSET)})

    assert (first.status_code, last.status_code) == (200, 200)
    assert rows(last.json()) == []


def test_limit_and_offset_page_through_the_recipes(staff: APIClient, recipes: Any) -> None:
    pages = [staff.get("/api/recipes", {"limit": "2", "offset": str(o)}).json() for o in (0, 2)]

    assert [[r["slug"] for r in page] for page in pages] == [["alpha", "bravo"], ["charlie"]]


def test_limit_and_offset_page_through_the_runs_newest_first(
    staff: APIClient, staff_user: Any, recipes: list[Recipe]
) -> None:
    recipe_publish(recipe=recipes[0], user=staff_user)
    runs = [
        services.run_start(user=staff_user, recipe=recipes[0], inputs={"topic": str(i)})
        for i in range(3)
    ]

    page = staff.get("/api/runs/", {"limit": "1", "offset": "1"}).json()

    assert [r["id"] for r in page] == [runs[1].pk]
    assert len(staff.get("/api/runs/").json()) == 3


def test_the_actor_list_pages_in_an_envelope(staff: APIClient, actors: Any) -> None:
    ActorFactory(name="zz-last")

    body = staff.get("/api/actors/", {"limit": "2", "offset": "1"}).json()

    assert body["count"] == 5
    assert len(body["results"]) == 2
    assert body["next"] and body["previous"]


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_it_refuses_a_bad_event_cursor(staff: APIClient, recipes: Any, value: str) -> None:
    recipe_publish(recipe=recipes[0], user=recipes[0].owner)
    run = services.run_start(user=recipes[0].owner, recipe=recipes[0], inputs={"topic": "x"})

    response = staff.get(f"/api/runs/{run.pk}/events", {"after": value})

    assert response.status_code == 400
    assert response.json() == {"errors": ["after: a whole number"]}


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_it_refuses_a_bad_version_to_export(staff: APIClient, recipes: Any, value: str) -> None:
    response = staff.get("/api/recipes/alpha/export", {"version": value})

    assert response.status_code == 400
    assert response.json() == {"errors": [f"version: no version {value} of 'alpha'"]}


# Ids in the address: ASCII digits only, and one past every row is simply not found.
ADDRESSES = [
    "/api/runs/{id}/",
    "/api/runs/{id}/events",
    "/api/actors/{id}/",
]


ODD_IDS = [
    pytest.param(HUGE, id="huge"),
    pytest.param("9" * 5000, id="5000 digits"),
    pytest.param("\u0661", id="arabic-indic digit"),
    pytest.param("²", id="superscript digit"),
    pytest.param("1.0", id="fraction"),
    pytest.param("-1", id="negative"),
]


@pytest.mark.parametrize("template", ADDRESSES)
@pytest.mark.parametrize("value", ODD_IDS)
def test_an_odd_id_in_the_address_is_not_found(
    staff: APIClient, actors: Any, template: str, value: str
) -> None:
    response = staff.get(template.format(id=value))

    assert response.status_code == 404, response.content
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("value", ODD_IDS)
@pytest.mark.parametrize(
    "template", ["/api/runs/{id}/cancel", "/api/tasks/{id}/decide", "/api/actors/{id}/"]
)
def test_an_odd_id_to_write_to_is_not_found(staff: APIClient, template: str, value: str) -> None:
    method = staff.delete if template.startswith("/api/actors") else staff.post
    response = method(template.format(id=value), {"decision": "approve"}, format="json")

    assert response.status_code == 404, response.content
