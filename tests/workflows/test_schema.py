"""The OpenAPI schema is valid, complete, and generated without warnings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.test import Client, override_settings
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db


def test_the_schema_validates(api: Any) -> None:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = (
        response.json()
        if response["Content-Type"].endswith("json")
        else yaml.safe_load(response.content)
    )
    validate(schema)


def test_the_schema_lists_the_recipe_endpoints(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    # Routes take an optional trailing slash; the schema writes it.
    paths = {p.rstrip("/"): item for p, item in schema["paths"].items()}

    assert {
        "/api/actors",
        "/api/actors/{id}",
        "/api/recipes",
        "/api/recipes/import",
        "/api/recipes/{slug}",
        "/api/recipes/{slug}/export",
        "/api/recipes/{slug}/publish",
        "/api/recipes/{slug}/lint",
        "/api/recipes/{slug}/versions",
        "/api/auth/token",
    } <= set(paths)
    assert set(paths["/api/recipes/{slug}"]) >= {"get", "put", "patch", "delete"}
    assert set(paths["/api/actors/{id}"]) >= {"get", "put", "patch", "delete"}


def test_spectacular_validates_without_warnings(tmp_path: Path) -> None:
    # A fresh process: drf-spectacular keeps (and deduplicates) its warnings per process.
    out = tmp_path / "schema.yaml"
    env = {**os.environ, "SECRET_KEY": os.environ.get("SECRET_KEY", "test-only-not-secret")}

    done = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn",
         "--file", str(out)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "Error" not in done.stderr, done.stderr
    validate(yaml.safe_load(out.read_text()))


def test_the_docs_page_loads_for_a_user(api: Any) -> None:
    response = api.get("/api/docs/")

    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_the_docs_page_loads_swagger_ui_from_our_own_static_files(api: Any) -> None:
    page = api.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    static_url = "/" + settings.STATIC_URL.lstrip("/")

    assert {Path(a).name for a in assets} >= {
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
        "favicon-32x32.png",
    }
    assert all(a.startswith(static_url) for a in assets), assets
    assert not re.search(r"https?://|cdn|unpkg|jsdelivr", page, re.IGNORECASE)


@override_settings(WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=True)
def test_the_docs_page_assets_are_served(api: Any) -> None:
    # Served from the app's static folders as collectstatic gathers them; a new client loads
    # WhiteNoise with these settings.
    page = api.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)

    for asset in assets:
        response = Client().get(asset)
        assert response.status_code == 200, asset
        assert b"".join(response.streaming_content), asset


def test_the_schema_is_closed_to_anonymous_callers(anon_api: Any) -> None:
    assert anon_api.get("/api/schema/").status_code in (401, 403)


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def test_every_operation_documents_the_errors_it_can_answer(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    for method, path, operation in operations(schema):
        expected = {"400", "403", "500", "503"}
        expected |= {"404"} if "{" in path else set()
        expected |= {"413", "415"} if "requestBody" in operation else set()
        assert expected <= set(operation["responses"]), (method, path)
        for code in expected:
            content = operation["responses"][code]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorOutput"}


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("POST", "/api/recipes/{slug}/runs/", "409"),
        ("POST", "/api/recipes/{slug}/runs/", "422"),
        ("POST", "/api/tasks/{task_id}/decide/", "409"),
        ("POST", "/api/runs/{run_id}/cancel/", "409"),
        ("PUT", "/api/recipes/{slug}/", "409"),
        ("DELETE", "/api/recipes/{slug}/", "409"),
        ("POST", "/api/recipes/import/", "409"),
        ("DELETE", "/api/actors/{id}/", "409"),
    ],
)
def test_conflicts_are_documented_where_they_happen(
    api: Any, method: str, path: str, code: str
) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    assert code in schema["paths"][path][method.lower()]["responses"]


def test_request_bodies_are_documented_as_json(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    for _method, path, operation in operations(schema):
        if "requestBody" in operation and path != "/api/auth/token/":
            assert set(operation["requestBody"]["content"]) == {"application/json"}, path


def test_a_run_start_documents_files_in_base64_and_as_multipart(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    start = schema["paths"]["/api/recipes/{slug}/runs/"]["post"]
    assert "content_base64" in start["description"]
    assert "multipart/form-data" in start["description"]
    download = schema["paths"]["/api/runs/{run_id}/files/{file_id}/"]["get"]
    assert {"application/octet-stream", "application/pdf", "image/png"} <= set(
        download["responses"]["200"]["content"]
    )


def test_recipe_documents_are_described_by_the_format_schema(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)
    document = schema["components"]["schemas"]["RecipeDocument"]

    assert document["required"] == ["format", "slug", "name", "steps"]
    assert document["properties"]["format"]["enum"] == ["branchline.recipe/v1"]
    assert document["properties"]["steps"]["items"] == {"$ref": "#/components/schemas/RecipeStep"}
    body = schema["paths"]["/api/recipes/import/"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RecipeDocument"
    }


def test_the_token_endpoint_is_open_to_anyone(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)
    operation = schema["paths"]["/api/auth/token/"]["post"]

    assert operation["security"] == [{}]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TokenOutput"
    }


def test_blank_text_is_documented_where_a_pattern_or_format_allows_it(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)
    actor = schema["components"]["schemas"]["Actor"]["properties"]

    assert re.search(actor["api_key_env"]["pattern"], "")
    assert re.search(actor["api_key_env"]["pattern"], "OPENAI_KEY")
    assert not re.search(actor["api_key_env"]["pattern"], "lower-case")
    assert actor["base_url"]["anyOf"] == [{"format": "uri"}, {"maxLength": 0}]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/recipes/short-story/publish", {"note": 0}),
        ("/api/recipes/short-story", {"name": 7}),
        ("/api/recipes/short-story", {"description": True}),
    ],
)
def test_it_refuses_a_number_where_the_schema_says_text(
    api: Any, recipe: Any, path: str, body: dict[str, Any]
) -> None:
    method = api.post if path.endswith("publish") else api.patch

    response = method(path, body, format="json")

    assert response.status_code == 400
    assert response.json() == {"errors": [f"{next(iter(body))}: Not a valid string."]}


def test_it_refuses_an_actor_name_that_is_a_number(staff_api: Any) -> None:
    response = staff_api.post(
        "/api/actors/", {"name": 12, "provider": "scripted", "config": {}}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"errors": ["name: Not a valid string."]}


@pytest.mark.parametrize("flag", ["maybe", "2", "null"])
def test_it_refuses_a_replace_flag_it_cannot_read(
    api: Any, recipe: Any, doc: dict[str, Any], flag: str
) -> None:
    response = api.post(f"/api/recipes/import?replace={flag}", doc, format="json")

    assert response.status_code == 400
    assert response.json() == {"errors": ["replace: true or false"]}


@pytest.mark.parametrize("flag", ["false", "0", "no"])
def test_a_replace_flag_that_says_no_keeps_the_draft(
    api: Any, recipe: Any, doc: dict[str, Any], flag: str
) -> None:
    response = api.post(f"/api/recipes/import?replace={flag}", doc, format="json")

    assert response.status_code == 409


def test_it_measures_text_as_sent_against_its_maximum_length(api: Any, recipe: Any) -> None:
    # DRF would strip the control character first and let 500 characters through.
    response = api.post("/api/recipes/short-story/publish", {"note": "\x1c" + "n" * 500})

    assert response.status_code == 400
    assert response.json() == {
        "errors": ["note: Ensure this field has no more than 500 characters."]
    }


@pytest.mark.parametrize(
    ("text", "fits"),
    [("approve", True), (" approve ", True), (" \t ", False), ("", False), ("ok\x00", False)],
)
def test_text_that_must_not_be_blank_is_documented_as_such(api: Any, text: str, fits: bool) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)
    decision = schema["components"]["schemas"]["DecideInputRequest"]["properties"]["decision"]

    assert bool(re.search(decision["pattern"], text)) is fits


@pytest.mark.parametrize(("text", "fits"), [("", True), ("a note", True), ("a\x00note", False)])
def test_text_is_documented_as_holding_no_nul(api: Any, text: str, fits: bool) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)
    note = schema["components"]["schemas"]["PublishInputRequest"]["properties"]["note"]
    [query] = [p for p in schema["paths"]["/api/recipes/"]["get"]["parameters"] if p["name"] == "q"]

    assert bool(re.search(note["pattern"], text)) is fits
    assert bool(re.search(query["schema"]["pattern"], text)) is fits


def test_answers_are_documented_without_the_request_patterns(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    assert "pattern" not in schema["components"]["schemas"]["ErrorOutput"]["properties"]["detail"]
