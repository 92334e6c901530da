"""Keyset pagination of the API's lists: runs, tasks, a run's events and recipes.

Each list is walked page by page through its `Link` header: every item once, in the list's
order, even when items are added between two requests; a bad cursor or limit is a 400.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runner import events, services
from runner.models import HumanTask, Run, StepRun
from runner.status import RunStatus, StepStatus
from tests.conftest import Actors, api_client
from tests.factories import recipe_document
from workflows.apis.pagination import MAX_CURSOR_LENGTH
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

NEXT = re.compile(r'^<(?P<url>[^>]+)>; rel="next"$')
CURSOR_ERROR = "cursor: not a cursor of this list: follow the URL in the Link header (rel=next)"


@dataclass
class Page:
    ids: list[Any]
    next_url: str | None
    total: str | None


def get_page(client: APIClient, url: str, params: dict[str, str] | None = None) -> Page:
    response = client.get(url, params)
    assert response.status_code == 200, response.content
    link = response.headers.get("Link")
    match = NEXT.match(link) if link else None
    assert link is None or match, link
    path = urlsplit(url).path
    key = "seq" if path.endswith("/events") else "slug" if path == "/api/recipes" else "id"
    return Page(
        ids=[item[key] for item in response.json()],
        next_url=match["url"] if match else None,
        total=response.headers.get("X-Total-Count"),
    )


def walk(
    client: APIClient,
    url: str,
    params: dict[str, str],
    between: Callable[[], Any] = lambda: None,
) -> list[list[Any]]:
    """Follow the list's Link headers from its first page; call `between` between pages."""
    pages = []
    page = get_page(client, url, params)
    pages.append(page.ids)
    while page.next_url:
        between()
        assert page.next_url.startswith("http://testserver/")
        page = get_page(client, page.next_url)
        pages.append(page.ids)
        assert len(pages) < 100, "the walk does not end"
    return pages


def flat(pages: list[list[Any]]) -> list[Any]:
    return [item for page in pages for item in page]


def cursor_of(*values: Any) -> str:
    text = json.dumps(list(values))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


# --- the lists, each with a way to add items to it ------------------------------------------


@dataclass
class Listing:
    """A list of the API, and how to add an item to it (returning its id as the list shows it)."""

    url: str
    add: Callable[[], Any]
    # The full list, as the database orders it.
    everything: Callable[[], list[Any]]


@pytest.fixture
def reviewer(staff_user: Any, actors: Actors) -> Any:
    staff_user.groups.add(actors.reviewers)
    return staff_user


@pytest.fixture
def client(reviewer: Any) -> APIClient:
    return api_client(reviewer, raise_errors=False)


@pytest.fixture
def published(reviewer: Any, actors: Actors) -> Recipe:
    recipe = recipe_import(user=reviewer, data=recipe_document(slug="alpha", name="Alpha")).recipe
    recipe_publish(recipe=recipe, user=reviewer)
    return recipe


@pytest.fixture
def run(reviewer: Any, published: Recipe) -> Run:
    return services.run_start(user=reviewer, recipe=published, inputs={"topic": "owls"})


def add_run(user: Any, recipe: Recipe) -> int:
    return services.run_start(user=user, recipe=recipe, inputs={"topic": "owls"}).pk


def add_task(run: Run, actors: Actors) -> int:
    seq = run.steps.count() + 1
    step = StepRun.objects.create(
        run=run, seq=seq, step_key="review", step_name="Review", kind="human",
        status=StepStatus.WAITING_HUMAN, prompt="Is it good?",
    )  # fmt: skip
    task = HumanTask.objects.create(
        run=run, step_run=step, step_key="review", group=actors.reviewers,
        question="Is it good?", options=["approve", "reject"],
    )  # fmt: skip
    return task.pk


def add_event(run: Run) -> int:
    run.refresh_from_db()
    (row,) = events.record(run, [events.run_status(RunStatus.RUNNING)])
    run.save(update_fields=["event_seq"])
    return row.seq


def add_recipe(user: Any, name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    recipe_import(user=user, data=recipe_document(slug=slug, name=name))
    return slug


@pytest.fixture(params=["runs", "tasks", "events", "recipes"])
def listing(
    request: pytest.FixtureRequest, reviewer: Any, actors: Actors, published: Recipe, run: Run
) -> Listing:
    names = iter(f"Recipe {n:03d}" for n in range(1000))
    return {
        "runs": Listing(
            "/api/runs/",
            lambda: add_run(reviewer, published),
            lambda: list(Run.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)),
        ),
        "tasks": Listing(
            "/api/tasks/",
            lambda: add_task(run, actors),
            lambda: list(
                HumanTask.objects.order_by("created_at", "pk").values_list("pk", flat=True)
            ),
        ),
        "events": Listing(
            f"/api/runs/{run.pk}/events",
            lambda: add_event(run),
            lambda: list(run.events.order_by("seq").values_list("seq", flat=True)),
        ),
        "recipes": Listing(
            "/api/recipes",
            lambda: add_recipe(reviewer, next(names)),
            lambda: list(Recipe.objects.order_by("name", "pk").values_list("slug", flat=True)),
        ),
    }[request.param]


def fill(listing: Listing, length: int) -> list[Any]:
    while len(listing.everything()) < length:
        listing.add()
    return listing.everything()


# --- walking ----------------------------------------------------------------------------------


def test_a_walk_page_by_page_meets_every_item_once_in_order(
    client: APIClient, listing: Listing
) -> None:
    everything = fill(listing, 8)

    pages = walk(client, listing.url, {"limit": "3"})

    assert [len(page) for page in pages] == [3, 3, 2]
    assert flat(pages) == everything


def test_a_list_that_fills_its_one_page_exactly_has_no_next_link(
    client: APIClient, listing: Listing
) -> None:
    everything = fill(listing, 4)

    page = get_page(client, listing.url, {"limit": str(len(everything))})

    assert page.ids == everything
    assert page.next_url is None


def test_items_added_between_pages_neither_repeat_nor_hide_an_item(
    client: APIClient, listing: Listing
) -> None:
    before = fill(listing, 7)
    turns = iter(range(3))

    def add_two_on_the_first_turns() -> None:
        # Not on every turn: the lists oldest first would grow as fast as they are read.
        if next(turns, None) is not None:
            listing.add()
            listing.add()

    pages = walk(client, listing.url, {"limit": "2"}, between=add_two_on_the_first_turns)

    seen = flat(pages)
    assert len(seen) == len(set(seen)), f"repeated: {seen}"
    assert set(before) <= set(seen)
    # What was seen is in the list's order, the added items where the order puts them.
    everything = listing.everything()
    assert seen == [item for item in everything if item in set(seen)]


# A run's events start at `after`, not at an offset.
@pytest.mark.parametrize("listing", ["runs", "tasks", "recipes"], indirect=True)
def test_offset_pages_go_on_by_cursor(client: APIClient, listing: Listing) -> None:
    everything = fill(listing, 7)

    first = get_page(client, listing.url, {"limit": "2", "offset": "2"})
    assert first.next_url is not None
    rest = walk(client, first.next_url, {})

    assert first.ids + flat(rest) == everything[2:]
    assert "offset" not in parse_qs(urlsplit(first.next_url).query)


def test_runs_created_at_the_same_moment_page_by_their_id(
    client: APIClient, reviewer: Any, published: Recipe
) -> None:
    for _ in range(6):
        add_run(reviewer, published)
    Run.objects.update(created_at=timezone.now())

    pages = walk(client, "/api/runs/", {"limit": "4"})

    assert flat(pages) == list(Run.objects.order_by("-pk").values_list("pk", flat=True))


def test_tasks_created_at_the_same_moment_page_by_their_id(
    client: APIClient, run: Run, actors: Actors
) -> None:
    for _ in range(5):
        add_task(run, actors)
    HumanTask.objects.update(created_at=timezone.now())

    pages = walk(client, "/api/tasks/", {"limit": "2"})

    assert flat(pages) == list(HumanTask.objects.order_by("pk").values_list("pk", flat=True))


def test_recipes_of_one_name_page_by_their_id(client: APIClient, reviewer: Any) -> None:
    for n in range(5):
        recipe_import(user=reviewer, data=recipe_document(slug=f"same-{n}", name="Same"))

    pages = walk(client, "/api/recipes", {"limit": "2", "q": "same"})

    assert flat(pages) == [f"same-{n}" for n in range(5)]


def test_a_recipe_renamed_into_pages_already_read_is_not_read_twice(
    client: APIClient, reviewer: Any
) -> None:
    for name in ("Bravo", "Charlie", "Delta", "Echo"):
        add_recipe(reviewer, name)
    first = get_page(client, "/api/recipes", {"limit": "2"})
    # Added before the cursor and after it: only the second is on the pages to come.
    add_recipe(reviewer, "Aardvark")
    add_recipe(reviewer, "Zulu")

    rest = walk(client, first.next_url or "", {})

    assert first.ids + flat(rest) == ["bravo", "charlie", "delta", "echo", "zulu"]


# --- headers ------------------------------------------------------------------------------------


def test_the_link_keeps_the_runs_filters(
    client: APIClient, reviewer: Any, published: Recipe, actors: Actors
) -> None:
    other = recipe_import(user=reviewer, data=recipe_document(slug="other", name="Other")).recipe
    recipe_publish(recipe=other, user=reviewer)
    mine = [add_run(reviewer, published) for _ in range(3)]
    for _ in range(2):
        add_run(reviewer, other)
    Run.objects.filter(pk=mine[0]).update(status=RunStatus.FAILED)
    params = {"recipe": "alpha", "status": RunStatus.QUEUED, "limit": "1"}

    first = get_page(client, "/api/runs/", params)
    pages = walk(client, "/api/runs/", params)

    query = parse_qs(urlsplit(first.next_url or "").query)
    assert {k: v for k, v in query.items() if k != "cursor"} == {
        "recipe": ["alpha"],
        "status": ["queued"],
        "limit": ["1"],
    }
    queued = Run.objects.filter(recipe=published, status=RunStatus.QUEUED)
    assert flat(pages) == list(queued.order_by("-created_at", "-pk").values_list("pk", flat=True))


def test_the_link_keeps_the_recipe_search(client: APIClient, reviewer: Any) -> None:
    for name in ("Owl one", "Owl two", "Owl three", "Cat"):
        add_recipe(reviewer, name)

    first = get_page(client, "/api/recipes", {"q": "owl", "limit": "2"})
    pages = walk(client, "/api/recipes", {"q": "owl", "limit": "2"})

    assert parse_qs(urlsplit(first.next_url or "").query)["q"] == ["owl"]
    assert flat(pages) == ["owl-one", "owl-three", "owl-two"]


def test_the_events_link_goes_on_after_the_last_seq(client: APIClient, run: Run) -> None:
    for _ in range(4):
        add_event(run)

    first = get_page(client, f"/api/runs/{run.pk}/events", {"limit": "2"})

    query = parse_qs(urlsplit(first.next_url or "").query)
    assert query == {"after": [str(first.ids[-1])], "limit": ["2"]}


def test_the_events_default_to_a_thousand_a_page(client: APIClient, run: Run) -> None:
    run.refresh_from_db()
    events.record(run, [events.run_status(RunStatus.RUNNING)] * 1000)
    run.save(update_fields=["event_seq"])

    pages = walk(client, f"/api/runs/{run.pk}/events", {})

    assert [len(page) for page in pages] == [1000, run.event_seq - 1000]
    assert flat(pages) == list(range(1, run.event_seq + 1))


def test_tasks_recipes_and_events_count_the_whole_list(
    client: APIClient, run: Run, actors: Actors, reviewer: Any
) -> None:
    for _ in range(3):
        add_task(run, actors)
        add_recipe(reviewer, f"Extra {run.steps.count()}")
        add_event(run)
    run.refresh_from_db()

    tasks = get_page(client, "/api/tasks/", {"limit": "1"})
    later = get_page(client, tasks.next_url or "")
    recipes = get_page(client, "/api/recipes", {"limit": "1", "q": "extra"})
    run_events = get_page(client, f"/api/runs/{run.pk}/events", {"limit": "1", "after": "2"})

    assert (tasks.total, later.total) == ("3", "3")
    assert recipes.total == "3"
    assert run_events.total == str(run.event_seq) == str(run.events.count())


def test_the_runs_are_not_counted(client: APIClient, run: Run) -> None:
    assert get_page(client, "/api/runs/").total is None


def test_the_task_count_is_the_callers(
    client: APIClient, run: Run, actors: Actors, other_user: Any
) -> None:
    add_task(run, actors)

    assert get_page(client, "/api/tasks/").total == "1"
    assert get_page(api_client(other_user), "/api/tasks/").total == "0"


# --- bad input ----------------------------------------------------------------------------------


NOW = timezone.now()
BAD_CURSORS = [
    pytest.param("", id="empty"),
    pytest.param("!!!!", id="not base64"),
    pytest.param("abcde", id="base64 of the wrong length"),
    pytest.param("a" * (MAX_CURSOR_LENGTH + 1), id="too long"),
    pytest.param("é", id="not ascii"),
    pytest.param(base64.urlsafe_b64encode(b"\xff\xfe").decode(), id="not utf-8"),
    pytest.param(cursor_of(), id="no values"),
    pytest.param(base64.urlsafe_b64encode(b"{}").decode(), id="an object"),
    pytest.param(base64.urlsafe_b64encode(b"not json").decode(), id="not json"),
    pytest.param(base64.urlsafe_b64encode(b"[" * 2000).decode(), id="nested too deep"),
    pytest.param(cursor_of(NOW.isoformat()), id="one value short"),
    pytest.param(cursor_of(NOW.isoformat(), 1, 2), id="one value more"),
    pytest.param(cursor_of(NOW.isoformat(), -1), id="negative id"),
    pytest.param(cursor_of(NOW.isoformat(), 10**18), id="id past a bigint"),
    pytest.param(cursor_of(NOW.isoformat(), 1.5), id="fractional id"),
    pytest.param(cursor_of(NOW.isoformat(), True), id="boolean id"),
    pytest.param(cursor_of(NOW.isoformat(), "1"), id="id as text"),
    pytest.param(cursor_of(NOW.replace(tzinfo=None).isoformat(), 1), id="naive time"),
    pytest.param(cursor_of("yesterday", 1), id="not a time"),
    pytest.param(cursor_of(None, 1), id="null time"),
    pytest.param(cursor_of("0001-01-01T00:00:00+14:00", 1), id="time before year 1 in UTC"),
    pytest.param(cursor_of("9999-12-31T23:59:59-14:00", 1), id="time past year 9999 in UTC"),
]


@pytest.mark.parametrize("cursor", BAD_CURSORS)
@pytest.mark.parametrize("url", ["/api/runs/", "/api/tasks/"])
def test_it_refuses_a_bad_cursor_with_its_name(client: APIClient, url: str, cursor: str) -> None:
    response = client.get(url, {"cursor": cursor})

    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [CURSOR_ERROR]}


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param(cursor_of("Alpha", 1, 2), id="one value more"),
        pytest.param(cursor_of(1, 1), id="a number for a name"),
        pytest.param(cursor_of("a\u0000b", 1), id="NUL in the name"),
        pytest.param(
            base64.urlsafe_b64encode(b'["a\\ud800b",1]').decode(), id="lone surrogate in the name"
        ),
        pytest.param(cursor_of(None, 1), id="null for a name"),
    ],
)
def test_it_refuses_a_bad_recipe_cursor(client: APIClient, published: Recipe, cursor: str) -> None:
    response = client.get("/api/recipes", {"cursor": cursor})

    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [CURSOR_ERROR]}


def test_a_cursor_far_back_or_far_ahead_is_a_page_not_an_error(client: APIClient, run: Run) -> None:
    early = cursor_of("0001-01-01T00:00:00+00:00", 0)
    late = cursor_of((NOW + timedelta(days=1)).isoformat(), 10**18 - 1)

    assert get_page(client, "/api/runs/", {"cursor": early}).ids == []
    assert get_page(client, "/api/runs/", {"cursor": late}).ids == [run.pk]


@pytest.mark.parametrize("value", ["0", "1001", "abc", "-1", "1.5", "9" * 40])
def test_it_refuses_a_bad_event_limit(client: APIClient, run: Run, value: str) -> None:
    response = client.get(f"/api/runs/{run.pk}/events", {"limit": value})

    assert response.status_code == 400
    assert response.json() == {"errors": ["limit: a whole number from 1 to 1000"]}


def test_the_schema_documents_the_cursor_and_the_headers(client: APIClient) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    for path in ("/api/runs/", "/api/tasks/", "/api/recipes/"):
        operation = schema["paths"][path]["get"]
        names = {p["name"] for p in operation["parameters"]}
        assert {"cursor", "limit", "offset"} <= names, path
        assert "Link" in operation["responses"]["200"]["headers"], path
    events_get = schema["paths"]["/api/runs/{run_id}/events/"]["get"]
    assert {p["name"] for p in events_get["parameters"]} >= {"after", "limit"}
    assert set(events_get["responses"]["200"]["headers"]) == {"Link", "X-Total-Count"}
    tasks_get = schema["paths"]["/api/tasks/"]["get"]
    assert "X-Total-Count" in tasks_get["responses"]["200"]["headers"]
