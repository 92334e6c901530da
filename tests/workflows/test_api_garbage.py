"""Bad input on every write endpoint is answered with JSON errors, never with a server error."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import api_client
from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Actor, Recipe

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Raw:
    """A request body sent as is (what json.dumps cannot write, or not JSON at all)."""

    text: str
    content_type: str = "application/json"


def recipe_with(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """Return the minimal document (slug `short-story`) with `value` put at `path`."""
    doc = recipe_document(slug="short-story", name="Short Story")
    doc["steps"][0]["branches"] = [
        {
            "name": "b",
            "priority": 1,
            "when": {"type": "length_check", "operator": "less_than", "value": 5},
            "action": "CONTINUE",
            "target": "@complete",
        }
    ]
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = {"k": [value, i]}
    return value


def nested_condition(depth: int) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "default"}
    for _ in range(depth):
        condition = {"type": "not", "conditions": [condition]}
    return condition


HUGE = 10**30
BRANCH = ("steps", 0, "branches", 0)

# Bodies that are not what any endpoint expects, at the top level.
GARBAGE: list[tuple[str, Any]] = [
    ("empty object", {}),
    ("empty list", []),
    ("list", [1, "two", None]),
    ("string", "recipe"),
    ("null", None),
    ("zero", 0),
    ("huge integer", HUGE),
    ("float", 1e308),
    ("boolean", True),
    ("nested junk", {"a": {"b": [{"c": [None, {"d": 1e308}]}]}}),
    ("deeply nested junk", nested(200)),
    ("null fields", {"name": None, "document": None, "note": None, "revision": None}),
    ("list fields", {"name": ["a"], "document": ["a"], "note": ["a"], "revision": ["1"]}),
    ("object fields", {"name": {"a": 1}, "document": {}, "note": {"a": 1}, "revision": {}}),
    ("huge revision", {"document": recipe_with(("name",), "Renamed"), "revision": HUGE}),
    ("negative revision", {"document": recipe_with(("name",), "Renamed"), "revision": -1}),
    ("revision as text", {"document": recipe_with(("name",), "Renamed"), "revision": "one"}),
    ("document as text", {"document": json.dumps(recipe_document())}),
    ("share with junk", {"shared_with_users": [None, 1, {}], "shared_with_groups": [[]]}),
    ("share with a string", {"shared_with_users": "alice", "shared_with_groups": "editors"}),
    ("long name", {"name": "n" * 10_000, "note": "n" * 10_000}),
    ("NUL in text", {"name": "a\x00b", "note": "a\x00b", "description": "\x00"}),
    ("actor junk", {"name": 5, "kind": ["llm"], "provider": {}, "timeout_s": HUGE, "params": "x"}),
    ("actor huge timeout", {"name": "big", "provider": "scripted", "timeout_s": HUGE}),
    ("actor config junk", {"name": "cfg", "provider": "scripted", "config": [None], "params": [1]}),
    ("actor NUL in params", {"name": "nul", "provider": "scripted", "params": {"k": "a\x00b"}}),
    ("invalid JSON", Raw('{"document": ')),
    ("JSON Infinity", Raw('{"document": {"steps": Infinity}, "timeout_s": NaN}')),
    ("number that overflows a float", Raw('{"timeout_s": 1e400, "revision": 1e400}')),
    ("too deep to parse", Raw("[" * 50_000 + "]" * 50_000)),
    ("form body", Raw("name=x&document=y", "application/x-www-form-urlencoded")),
    ("XML body", Raw("<recipe/>", "application/xml")),
    ("binary body", Raw("\udcff\udcfe", "application/octet-stream")),
]

# Recipe documents with junk inside, for the endpoints that take one.
DOCUMENT_GARBAGE: list[tuple[str, Any]] = [
    ("steps of null", recipe_with(("steps",), [None])),
    ("steps of lists", recipe_with(("steps",), [[[]]])),
    ("branches a string", recipe_with(("steps", 0, "branches"), "none")),
    ("branches of null", recipe_with(("steps", 0, "branches"), [None])),
    ("condition type null", recipe_with((*BRANCH, "when"), {"type": None})),
    ("condition type a list", recipe_with((*BRANCH, "when"), {"type": ["and"]})),
    ("operator a number", recipe_with((*BRANCH, "when", "operator"), 5)),
    (
        "regex an object",
        recipe_with(
            (*BRANCH, "when"),
            {"type": "pattern_match", "operator": "regex_match", "value": {"x": 1}},
        ),
    ),
    ("length a string", recipe_with((*BRANCH, "when", "value"), "long")),
    ("length huge", recipe_with((*BRANCH, "when", "value"), HUGE)),
    ("conditions a string", recipe_with((*BRANCH, "when"), {"type": "and", "conditions": "x"})),
    ("conditions of null", recipe_with((*BRANCH, "when"), {"type": "or", "conditions": [None]})),
    ("not of nothing", recipe_with((*BRANCH, "when"), {"type": "not", "conditions": []})),
    (
        "not of two",
        recipe_with((*BRANCH, "when"), {"type": "not", "conditions": [{"type": "default"}] * 2}),
    ),
    ("deep logic", recipe_with((*BRANCH, "when"), nested_condition(150))),
    ("huge priority", recipe_with((*BRANCH, "priority"), HUGE)),
    ("huge timeout", recipe_with(("steps", 0, "timeout_s"), HUGE)),
    ("huge max_retries", recipe_with((*BRANCH, "params"), {"max_retries": HUGE})),
    ("params a list", recipe_with((*BRANCH, "params"), [1, 2])),
    ("target a number", recipe_with((*BRANCH, "target"), 7)),
    ("action null", recipe_with((*BRANCH, "action"), None)),
    ("position junk", recipe_with(("steps", 0, "position"), {"x": "left", "y": None})),
    ("position huge", recipe_with(("steps", 0, "position"), {"x": 1e308, "y": -1e308})),
    (
        "validation junk",
        recipe_with(("steps", 0, "validation"), {"threshold": "high", "max_attempts": HUGE}),
    ),
    (
        "tree junk",
        recipe_with(
            ("steps", 0), {"key": "t", "name": "T", "kind": "decision_tree", "tree": [None]}
        ),
    ),
    (
        "routes junk",
        recipe_with(
            ("steps", 0),
            {"key": "c", "name": "C", "kind": "classify", "actor": "writer", "routes": [None, "x"]},
        ),
    ),
    ("inputs junk", recipe_with(("inputs",), {"topic": None, "": {"type": []}})),
    ("actors junk", recipe_with(("actors",), {"writer": None, "": 5, "x": ["y"]})),
    ("prompt a list", recipe_with(("steps", 0, "prompt"), ["Write", "{topic}"])),
    ("prompt huge", recipe_with(("steps", 0, "prompt"), "{topic} " * 20_000)),
    ("NUL in name", recipe_with(("name",), "Short\x00Story")),
    ("NUL in prompt", recipe_with(("steps", 0, "prompt"), "Write\x00{topic}")),
    (
        "NUL in condition",
        recipe_with(
            (*BRANCH, "when"), {"type": "pattern_match", "operator": "contains", "value": "\x00"}
        ),
    ),
    ("NUL in a key", recipe_with(("inputs",), {"to\x00pic": {"type": "string"}})),
    ("slug with a slash", recipe_with(("slug",), "../../etc")),
    ("slug huge", recipe_with(("slug",), "s" * 10_000)),
    ("step key with a NUL", recipe_with(("steps", 0, "key"), "wr\x00ite")),
    ("float where an int is", recipe_with(("steps", 0, "timeout_s"), 1.5)),
    ("boolean priority", recipe_with((*BRANCH, "priority"), True)),
]

RAW_DOCUMENTS: list[tuple[str, Raw]] = [
    (
        "infinite position",
        Raw(
            json.dumps(recipe_with(("steps", 0, "position"), {"x": 1, "y": 2})).replace(
                '"x": 1', '"x": 1e400'
            )
        ),
    ),
    (
        "infinite length",
        Raw(
            json.dumps(recipe_with((*BRANCH, "when", "value"), 5)).replace(
                '"value": 5', '"value": 1e400'
            )
        ),
    ),
]

RECIPE = "/api/recipes/short-story"
ACTOR = "/api/actors/{actor}/"

# (method, url, whether the body is a whole recipe document or wraps one in `document`)
WRITE_ENDPOINTS: list[tuple[str, str, str]] = [
    ("post", "/api/recipes", "document"),
    ("post", "/api/recipes/import", "document"),
    ("post", "/api/recipes/import?replace=true", "document"),
    ("put", RECIPE, "wrapped"),
    ("patch", RECIPE, "none"),
    ("post", f"{RECIPE}/publish", "none"),
    ("post", "/api/actors/", "none"),
    ("put", ACTOR, "none"),
    ("patch", ACTOR, "none"),
    ("post", "/api/auth/token", "none"),
]


def send(client: Any, method: str, url: str, body: Any) -> Any:
    if isinstance(body, Raw):
        data = body.text.encode("utf-8", "surrogateescape")
        return getattr(client, method)(url, data, content_type=body.content_type)
    return getattr(client, method)(url, body, format="json")


def assert_clear_refusal(response: Any, method: str, url: str) -> None:
    where = f"{method.upper()} {url} -> {response.status_code}: {response.content[:300]!r}"
    assert response.status_code < 500, where
    if response.status_code < 400:
        return
    assert response["Content-Type"].startswith("application/json"), where
    body = response.json()
    assert isinstance(body, dict), where
    if "errors" in body:
        assert body["errors"], where
        for error in body["errors"]:
            assert isinstance(error, str), where
            path, _, message = error.partition(": ")
            assert path and message, where
    else:
        assert isinstance(body.get("detail"), str), where


@pytest.fixture
def staff(staff_user: Any, recipe: Recipe) -> Any:
    """Return a client allowed on every write endpoint (staff), showing server errors as 500."""
    return api_client(staff_user, raise_errors=False)


def endpoint_params(bodies: list[tuple[str, Any]], kinds: set[str]) -> list[Any]:
    return [
        pytest.param(method, url, body, id=f"{method}:{url}:{name}")
        for method, url, kind in WRITE_ENDPOINTS
        if kind in kinds
        for name, body in bodies
    ]


@pytest.mark.parametrize(
    ("method", "url", "body"),
    endpoint_params(GARBAGE, {"document", "wrapped", "none"}),
)
def test_it_refuses_garbage_clearly(
    staff: Any, actors: Any, recipe: Recipe, method: str, url: str, body: Any
) -> None:
    before = document_from_recipe(recipe)
    url = url.format(actor=actors.judge.pk)

    response = send(staff, method, url, body)

    assert_clear_refusal(response, method, url)
    if method == "put" and url == RECIPE and response.status_code >= 400:
        assert document_from_recipe(recipe) == before


@pytest.mark.parametrize(
    ("method", "url", "body"),
    endpoint_params(DOCUMENT_GARBAGE + RAW_DOCUMENTS, {"document"}),
)
def test_it_refuses_a_document_with_junk_inside(
    staff: Any, actors: Any, method: str, url: str, body: Any
) -> None:
    before = Recipe.objects.count()

    response = send(staff, method, url, body)

    assert_clear_refusal(response, method, url)
    if response.status_code >= 400:
        assert Recipe.objects.count() == before


@pytest.mark.parametrize(("name", "document"), DOCUMENT_GARBAGE)
def test_it_refuses_a_draft_with_junk_inside(
    staff: Any, actors: Any, recipe: Recipe, name: str, document: Any
) -> None:
    before = document_from_recipe(recipe)

    response = staff.put(RECIPE, {"document": document, "revision": 1}, format="json")

    assert_clear_refusal(response, "put", RECIPE)
    if response.status_code >= 400:
        assert document_from_recipe(recipe) == before


@pytest.mark.parametrize(("name", "body"), RAW_DOCUMENTS)
def test_it_refuses_a_raw_draft_with_junk_inside(
    staff: Any, actors: Any, recipe: Recipe, name: str, body: Raw
) -> None:
    wrapped = Raw('{"revision": 1, "document": ' + body.text + "}")

    response = send(staff, "put", RECIPE, wrapped)

    assert_clear_refusal(response, "put", RECIPE)


@pytest.mark.parametrize(("name", "body"), DOCUMENT_GARBAGE[:10])
def test_it_refuses_junk_uploaded_as_a_file(staff: Any, actors: Any, name: str, body: Any) -> None:
    upload = SimpleUploadedFile("r.json", json.dumps(body).encode())

    response = staff.post("/api/recipes/import", {"file": upload}, format="multipart")

    assert_clear_refusal(response, "post", "/api/recipes/import")


def test_it_refuses_a_file_field_that_is_not_a_file(staff: Any, actors: Any) -> None:
    response = staff.post("/api/recipes/import", {"file": "not a file"}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("file: ")


def test_actors_are_unchanged_by_refused_garbage(staff: Any, actors: Any) -> None:
    before = list(Actor.objects.values())

    for name, body in GARBAGE:
        if name == "form body":
            continue  # `name=x` is a valid rename, sent as a form
        response = send(staff, "put", ACTOR.format(actor=actors.judge.pk), body)
        assert_clear_refusal(response, "put", ACTOR)

    assert list(Actor.objects.values()) == before
