"""Text the database cannot hold (NUL, lone surrogates) is a 400 naming the field, wherever it is
in a request to the API, and the same on SQLite and PostgreSQL (which would refuse it with a 500).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from config.asgi import application
from runner import services
from runner.models import HumanTask, Run, StepRun
from runner.status import StepStatus
from tests.conftest import api_client
from tests.factories import recipe_document
from workflows.models import Actor, Recipe, RecipeVersion
from workflows.services import recipe_publish

pytestmark = pytest.mark.django_db

NUL = "contains a NUL character"
SURROGATE = "contains a lone surrogate (U+D800)"
BAD_TEXT = [
    pytest.param("a\x00b", NUL, id="NUL"),
    pytest.param("a\ud800b", SURROGATE, id="surrogate"),
]


@pytest.fixture
def staff(staff_user: Any, recipe: Recipe) -> APIClient:
    """Return a client allowed on every endpoint: staff, in the reviewers' group."""
    staff_user.groups.add(*recipe.owner.groups.all())
    return api_client(staff_user, raise_errors=False)


@pytest.fixture
def things(staff_user: Any, actors: Any, recipe: Recipe) -> dict[str, int]:
    """Publish the recipe, start a run of it, and open a task of that run for the reviewers."""
    staff_user.groups.add(actors.reviewers)
    recipe_publish(recipe=recipe, user=staff_user)
    run = services.run_start(user=staff_user, recipe=recipe, inputs={"topic": "owls"})
    step = StepRun.objects.create(
        run=run, seq=1, step_key="review", step_name="Review", kind="human",
        status=StepStatus.WAITING_HUMAN, prompt="Is it good?",
    )  # fmt: skip
    task = HumanTask.objects.create(
        run=run, step_run=step, step_key="review", group=actors.reviewers,
        question="Is it good?", options=["approve", "reject", "revise"],
    )  # fmt: skip
    return {"run": run.pk, "task": task.pk, "actor": actors.judge.pk}


def snapshot() -> list[Any]:
    """Return everything a refused request must leave as it was."""
    return [
        list(Recipe.objects.values()),
        list(Actor.objects.values()),
        list(RecipeVersion.objects.values_list("pk", flat=True)),
        list(Run.objects.values_list("pk", "status")),
        list(HumanTask.objects.values()),
    ]


def document_with(field: str, text: str) -> dict[str, Any]:
    doc = recipe_document(slug="short-story", name="Short Story")
    if field == "prompt":
        doc["steps"][0]["prompt"] = text
    else:
        doc[field] = text
    return doc


Body = Callable[[str], Any]

# (method, url, the body with the bad text in it, where the error says it is)
BODIES: list[tuple[str, str, Body, str]] = [
    ("post", "/api/recipes/short-story/runs", lambda t: {"inputs": {"topic": t}}, "inputs.topic"),
    ("post", "/api/recipes/short-story/runs", lambda t: {"inputs": {t: "owls"}}, "inputs: a key"),
    (
        "post",
        "/api/recipes/short-story/runs",
        lambda t: {"inputs": {"topic": "owls"}, "script": {"writer": ["fine", t]}},
        "script.writer[1]",
    ),
    ("post", "/api/tasks/{task}/decide", lambda t: {"decision": t}, "decision"),
    ("post", "/api/tasks/{task}/decide", lambda t: {"decision": "approve", "comment": t}, "comment"),
    ("patch", "/api/recipes/short-story", lambda t: {"name": t}, "name"),
    ("patch", "/api/recipes/short-story", lambda t: {"shared_with_users": [t]}, "shared_with_users[0]"),
    (
        "put",
        "/api/recipes/short-story",
        lambda t: {"document": document_with("name", t), "revision": 1},
        "document.name",
    ),
    ("post", "/api/recipes/short-story/publish", lambda t: {"note": t}, "note"),
    ("post", "/api/recipes", lambda t: document_with("description", t), "description"),
    ("post", "/api/recipes/import", lambda t: document_with("prompt", t), "steps[0].prompt"),
    ("post", "/api/actors/", lambda t: {"name": "a", "provider": "scripted", "model": t}, "model"),
    ("post", "/api/actors/", lambda t: {"name": t, "provider": "scripted"}, "name"),
    ("put", "/api/actors/{actor}/", lambda t: {"name": "n", "provider": "scripted", "api_key_env": t}, "api_key_env"),
    ("patch", "/api/actors/{actor}/", lambda t: {"params": {"stop": [t]}}, "params.stop[0]"),
    ("patch", "/api/actors/{actor}/", lambda t: {"config": {"replies": ["ok", t]}}, "config.replies[1]"),
    ("post", "/api/auth/token", lambda t: {"username": t, "password": "x"}, "username"),
    ("post", "/api/auth/token", lambda t: {"username": "sam", "password": t}, "password"),
]  # fmt: skip


def expected_error(where: str, problem: str) -> str:
    return f"{where} {problem}" if where.endswith(": a key") else f"{where}: {problem}"


@pytest.mark.parametrize(("text", "problem"), BAD_TEXT)
@pytest.mark.parametrize(
    ("method", "url", "body", "where"),
    [pytest.param(*row, id=f"{row[0]}:{row[1]}:{row[3]}") for row in BODIES],
)
def test_it_refuses_unstorable_text_in_a_json_body_with_its_path(
    staff: APIClient,
    things: dict[str, int],
    method: str,
    url: str,
    body: Body,
    where: str,
    text: str,
    problem: str,
) -> None:
    before = snapshot()
    # json.dumps escapes both as \u0000 and \ud800, the only way JSON can carry them.
    raw = json.dumps(body(text))

    response = getattr(staff, method)(url.format(**things), raw, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [expected_error(where, problem)]}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "url", "fields", "where"),
    [
        ("post", "/api/auth/token", {"username": "a\x00b", "password": "x"}, "username"),
        ("post", "/api/tasks/{task}/decide", {"decision": "approve", "comment": "\x00"}, "comment"),
        ("patch", "/api/actors/{actor}/", {"model": "a\x00b"}, "model"),
        ("put", "/api/actors/{actor}/", {"name": "n", "provider": "scripted", "model": "\x00"}, "model"),
        ("patch", "/api/recipes/short-story", {"description": "a\x00b"}, "description"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("encoding", ["multipart", "urlencoded"])
def test_it_refuses_a_nul_in_a_form_body_with_its_field(
    staff: APIClient,
    things: dict[str, int],
    method: str,
    url: str,
    fields: dict[str, str],
    where: str,
    encoding: str,
) -> None:
    before = snapshot()
    url = url.format(**things)

    if encoding == "multipart":
        response = getattr(staff, method)(url, fields, format="multipart")
    else:
        body = "&".join(f"{k}={v.replace(chr(0), '%00')}" for k, v in fields.items())
        response = getattr(staff, method)(
            url, body, content_type="application/x-www-form-urlencoded"
        )

    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [f"{where}: {NUL}"]}
    assert snapshot() == before


# Every query parameter, read or not, on every kind of endpoint.
QUERIES = [
    ("get", "/api/recipes", "q"),
    ("get", "/api/recipes", "limit"),
    ("get", "/api/runs/", "status"),
    ("get", "/api/runs/", "recipe"),
    ("get", "/api/runs/", "offset"),
    ("get", "/api/runs/{run}/", "anything"),
    ("get", "/api/runs/{run}/events", "after"),
    ("get", "/api/tasks/", "limit"),
    ("get", "/api/actors/", "offset"),
    ("get", "/api/actors/{actor}/", "format"),
    ("get", "/api/recipes/short-story/export", "version"),
    ("get", "/api/recipes/short-story/lint", "x"),
    ("get", "/api/schema/", "format"),
    ("post", "/api/recipes/import", "replace"),
    ("post", "/api/runs/{run}/cancel", "why"),
]


@pytest.mark.parametrize(("method", "url", "name"), QUERIES)
def test_it_refuses_a_nul_in_any_query_parameter_with_its_name(
    staff: APIClient, things: dict[str, int], method: str, url: str, name: str
) -> None:
    before = snapshot()

    response = getattr(staff, method)(f"{url.format(**things)}?{name}=a%00b", format="json")

    assert response.status_code == 400, response.content
    body = response.json()
    assert body == {"errors": [f"{name}: {NUL}"], "request_id": response["X-Request-ID"]}
    assert snapshot() == before


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("/api/recipes?a%00b=1", "$: a field name contains a NUL character"),
        ("/api/recipes/short%00story", "$: the address contains a NUL character"),
        ("/api/runs/?status=running&recipe=x%00", "recipe: contains a NUL character"),
    ],
)
def test_it_refuses_a_nul_in_a_parameter_name_or_the_address(
    staff: APIClient, url: str, error: str
) -> None:
    response = staff.get(url)

    assert response.status_code == 400
    assert response.json()["errors"] == [error]


def test_a_query_string_cannot_carry_a_lone_surrogate(staff: APIClient) -> None:
    # Its UTF-8 form is not UTF-8: Django reads it as replacement characters, which are text.
    response = staff.get("/api/recipes?q=%ED%A0%80")

    assert response.status_code == 200


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("NUL in JSON", '{"name": "a\\u0000b"}', f"name: {NUL}"),
        ("surrogate in JSON", '{"description": "\\ud800"}', f"description: {SURROGATE}"),
        ("NUL in YAML", 'name: "a\\0b"\n', f"name: {NUL}"),
        ("NUL in a key", '{"inputs": {"a\\u0000": {}}}', f"inputs: a key {NUL}"),
    ],
)
def test_a_recipe_file_with_unstorable_text_is_refused_with_its_path(
    staff: APIClient, actors: Any, name: str, content: str, error: str
) -> None:
    upload = SimpleUploadedFile("recipe.json", content.encode())

    response = staff.post("/api/recipes/import", {"file": upload}, format="multipart")

    assert response.status_code == 400, response.content
    assert error in response.json()["errors"]


@pytest.mark.parametrize("url", ["/api/runs/", "/runs/", "/login/"])
@pytest.mark.parametrize(
    ("headers", "where"),
    [
        # Django reads an octal escape inside a quoted cookie: all ASCII, yet a NUL.
        ({"HTTP_COOKIE": 'sessionid="abcdefgh\\000ijkl"'}, "cookies.sessionid"),
        ({"HTTP_AUTHORIZATION": "Token abcdefgh\x00ijkl"}, "headers.Authorization"),
    ],
)
def test_it_refuses_a_nul_in_the_credentials_before_looking_them_up(
    db: None, url: str, headers: dict[str, str], where: str
) -> None:
    client = Client(raise_request_exception=False)

    response = client.get(url, **headers)

    assert response.status_code == 400
    assert f"{where}: contains a NUL character" in response.content.decode()


async def test_a_websocket_with_a_nul_in_its_cookie_is_refused_before_the_session(
    transactional_db: None,
) -> None:
    communicator = WebsocketCommunicator(
        application,
        "/ws/runs/",
        headers=[
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", b'sessionid="abcdefgh\\000ijkl"'),
        ],
    )

    connected, code = await communicator.connect()

    assert (connected, code) == (False, 4400)
