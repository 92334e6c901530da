"""The recipes API: import (JSON body, upload, replace), update with revisions, lint, list."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Recipe, Step
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db


def upload(text: str | bytes, name: str = "recipe.json") -> dict[str, Any]:
    data = text.encode() if isinstance(text, str) else text
    return {"file": SimpleUploadedFile(name, data, content_type="application/octet-stream")}


@pytest.mark.parametrize("url", ["/api/recipes/import", "/api/recipes/import/", "/api/recipes"])
def test_it_imports_a_json_body(api: Any, actors: Any, doc: dict[str, Any], url: str) -> None:
    response = api.post(url, doc, format="json")

    assert response.status_code == 201, response.content
    assert response.json() == {"slug": "short-story", "name": "Short Story", "warnings": []}
    recipe = Recipe.objects.get(slug="short-story")
    assert recipe.owner.username == "alice"
    assert document_from_recipe(recipe) == doc


def test_it_imports_an_uploaded_json_file(api: Any, actors: Any, doc: dict[str, Any]) -> None:
    response = api.post("/api/recipes/import", upload(json.dumps(doc)), format="multipart")

    assert response.status_code == 201, response.content
    assert document_from_recipe(Recipe.objects.get()) == doc


def test_it_imports_an_uploaded_yaml_file(api: Any, actors: Any, doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc, sort_keys=False)

    response = api.post("/api/recipes/import", upload(text, "recipe.yaml"), format="multipart")

    assert response.status_code == 201, response.content
    assert document_from_recipe(Recipe.objects.get()) == doc


def test_it_refuses_an_existing_slug_with_409(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    doc["name"] = "Second Try"

    response = api.post("/api/recipes/import", doc, format="json")

    assert response.status_code == 409
    assert response.json() == {
        "errors": [
            "slug: a recipe 'short-story' exists already; import with replace to update its draft"
        ]
    }
    recipe.refresh_from_db()
    assert recipe.name == "Short Story"


@pytest.mark.parametrize("flag", ["true", "1", "yes", "True"])
def test_it_replaces_a_draft_with_replace_true(
    api: Any, recipe: Recipe, doc: dict[str, Any], flag: str
) -> None:
    doc["name"] = "Second Try"

    response = api.post(f"/api/recipes/import?replace={flag}", doc, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Second Try"
    recipe.refresh_from_db()
    assert (recipe.name, recipe.revision) == ("Second Try", 2)


def test_it_replaces_a_draft_from_an_upload(api: Any, recipe: Recipe, doc: dict[str, Any]) -> None:
    doc["name"] = "Uploaded Again"

    response = api.post(
        "/api/recipes/import?replace=true", upload(json.dumps(doc)), format="multipart"
    )

    assert response.status_code == 200
    recipe.refresh_from_db()
    assert recipe.name == "Uploaded Again"


def test_it_creates_with_replace_true_when_the_slug_is_new(
    api: Any, actors: Any, doc: dict[str, Any]
) -> None:
    response = api.post("/api/recipes/import?replace=true", doc, format="json")

    assert response.status_code == 201


def test_it_answers_a_rejected_import_with_every_error(api: Any, actors: Any) -> None:
    doc = recipe_document(slug="broken", actors={"writer": "nobody"})
    doc["steps"][0]["branches"] = [
        {
            "name": "b",
            "priority": 1,
            "when": {"type": "length_check", "operator": "lessthan", "value": 2},
            "action": "CONTINUE",
            "target": "@complete",
        }
    ]

    response = api.post("/api/recipes/import", doc, format="json")

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert "actors.writer: unknown actor 'nobody'" in errors
    assert any(
        e.startswith("steps[0].branches[0].when.operator: unknown operator 'lessthan'")
        for e in errors
    ), errors
    assert not Recipe.objects.exists()


def test_it_answers_a_bad_upload_with_its_error(api: Any, actors: Any) -> None:
    response = api.post("/api/recipes/import", upload("steps: [unclosed"), format="multipart")

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error.startswith("$: invalid YAML at line 1")


def test_it_refuses_an_uploaded_file_over_the_limit(
    api: Any, actors: Any, doc: dict[str, Any], settings: Any
) -> None:
    settings.RECIPE_MAX_BYTES = 500
    doc["description"] = "x" * 600
    text = json.dumps(doc)

    response = api.post("/api/recipes/import", upload(text), format="multipart")

    assert response.status_code == 400
    assert response.json() == {"errors": [f"$: the file is {len(text)} bytes; the limit is 500"]}


def test_it_refuses_a_json_body_over_the_limit(
    api: Any, actors: Any, doc: dict[str, Any], settings: Any
) -> None:
    settings.RECIPE_MAX_BYTES = 500
    doc["description"] = "x" * 600

    response = api.post("/api/recipes/import", doc, format="json")

    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error.startswith("$: the document is ")
    assert error.endswith(" bytes as JSON; the limit is 500")
    assert not Recipe.objects.exists()


def test_it_refuses_a_request_body_over_the_upload_limit(
    api: Any, recipe: Recipe, doc: dict[str, Any], settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    doc["description"] = "x" * 2000

    response = api.put("/api/recipes/short-story", {"document": doc}, format="json")

    assert response.status_code == 413
    assert response.json() == {"detail": "The request body is larger than 1000 bytes."}
    recipe.refresh_from_db()
    assert recipe.revision == 1


def test_it_asks_for_a_file_when_a_form_has_none(api: Any, actors: Any) -> None:
    response = api.post("/api/recipes/import", {"slug": "x"}, format="multipart")

    assert response.status_code == 400
    assert response.json() == {
        "errors": ["file: send the recipe as a JSON body, or upload it as 'file'"]
    }


def test_it_imports_a_raw_yaml_body_named_by_its_header(
    api: Any, actors: Any, doc: dict[str, Any]
) -> None:
    response = api.post(
        "/api/recipes/import",
        yaml.safe_dump(doc).encode(),
        content_type="application/yaml",
        HTTP_CONTENT_DISPOSITION='attachment; filename="story.yaml"',
    )

    assert response.status_code == 201, response.content
    assert document_from_recipe(Recipe.objects.get()) == doc


def test_it_asks_a_raw_body_for_its_file_name(api: Any, actors: Any, doc: dict[str, Any]) -> None:
    response = api.post(
        "/api/recipes/import", yaml.safe_dump(doc).encode(), content_type="application/yaml"
    )

    assert response.status_code == 400
    assert "filename" in response.json()["detail"]


class TestUpdate:
    def test_it_saves_with_the_right_revision(
        self, api: Any, recipe: Recipe, doc: dict[str, Any]
    ) -> None:
        doc["steps"][0]["prompt"] = "Write a sad story about {topic}"

        response = api.put(
            "/api/recipes/short-story", {"document": doc, "revision": 1}, format="json"
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["revision"] == 2
        assert body["document"] == doc
        assert body["warnings"] == []
        recipe.refresh_from_db()
        assert recipe.revision == 2

    def test_it_refuses_a_stale_revision_with_409(
        self, api: Any, recipe: Recipe, doc: dict[str, Any]
    ) -> None:
        doc["name"] = "First Save"
        assert (
            api.put(
                "/api/recipes/short-story", {"document": doc, "revision": 1}, format="json"
            ).status_code
            == 200
        )
        doc["name"] = "Second Save"

        response = api.put(
            "/api/recipes/short-story", {"document": doc, "revision": 1}, format="json"
        )

        assert response.status_code == 409
        assert response.json() == {
            "errors": [
                "revision: the draft was saved elsewhere (revision 2, you edited 1); "
                "reload it before saving"
            ]
        }
        recipe.refresh_from_db()
        assert (recipe.name, recipe.revision) == ("First Save", 2)

    def test_it_saves_without_a_revision(
        self, api: Any, recipe: Recipe, doc: dict[str, Any]
    ) -> None:
        doc["name"] = "Blind Save"

        response = api.put("/api/recipes/short-story/", {"document": doc}, format="json")

        assert response.status_code == 200
        assert response.json()["revision"] == 2

    def test_it_refuses_a_new_slug(self, api: Any, recipe: Recipe, doc: dict[str, Any]) -> None:
        doc["slug"] = "renamed"

        response = api.put("/api/recipes/short-story", {"document": doc}, format="json")

        assert response.status_code == 400
        assert response.json() == {"errors": ["slug: the slug of a recipe cannot change"]}

    def test_it_saves_an_invalid_document_as_written_and_lists_its_errors(
        self, api: Any, recipe: Recipe, doc: dict[str, Any]
    ) -> None:
        # Unfinished work is saved; the rows keep the last draft that was valid.
        doc["steps"][0]["prompt"] = "Write about {nope}"

        response = api.put(
            "/api/recipes/short-story", {"document": doc, "revision": 1}, format="json"
        )

        assert response.status_code == 200, response.content
        assert any(e.startswith("steps[0].prompt: ") for e in response.json()["errors"])
        assert response.json()["document"] == doc
        recipe.refresh_from_db()
        assert recipe.revision == 2
        assert recipe.steps.get().prompt == "Write a short story about {topic}"

    def test_it_adds_the_slug_when_the_document_has_none(
        self, api: Any, recipe: Recipe, doc: dict[str, Any]
    ) -> None:
        del doc["slug"]

        response = api.put("/api/recipes/short-story", {"document": doc}, format="json")

        assert response.status_code == 200
        assert response.json()["document"]["slug"] == "short-story"

    def test_it_renames_and_describes_with_patch(self, api: Any, recipe: Recipe) -> None:
        response = api.patch(
            "/api/recipes/short-story",
            {"name": "Tiny Tales", "description": "Stories, but small."},
            format="json",
        )

        assert response.status_code == 200
        assert response.json()["name"] == "Tiny Tales"
        assert response.json()["document"]["description"] == "Stories, but small."

    def test_a_rename_counts_as_an_edit_of_the_draft(
        self, api: Any, recipe: Recipe, doc: dict[str, Any]
    ) -> None:
        # The name is part of the draft document: a PUT made from the old revision would
        # silently put the old name back.
        renamed = api.patch("/api/recipes/short-story", {"name": "Tiny Tales"}, format="json")

        stale = api.put("/api/recipes/short-story", {"document": doc, "revision": 1}, format="json")

        assert renamed.json()["revision"] == 2
        assert stale.status_code == 409
        recipe.refresh_from_db()
        assert recipe.name == "Tiny Tales"

    def test_sharing_is_not_an_edit_of_the_draft(
        self, api: Any, recipe: Recipe, other_user: Any
    ) -> None:
        response = api.patch(
            "/api/recipes/short-story", {"shared_with_users": ["mallory"]}, format="json"
        )

        assert response.json()["revision"] == 1

    def test_it_deletes_a_recipe(self, api: Any, recipe: Recipe) -> None:
        response = api.delete("/api/recipes/short-story")

        assert response.status_code == 204
        assert not Recipe.objects.exists()
        assert not Step.objects.exists()


def test_it_lists_and_searches_recipes(api: Any, user: Any, actors: Any) -> None:
    for slug, name in [("dragons", "Dragon Tales"), ("robots", "Robot Poems")]:
        assert (
            api.post(
                "/api/recipes/import", recipe_document(slug=slug, name=name), format="json"
            ).status_code
            == 201
        )

    everything = api.get("/api/recipes").json()
    found = api.get("/api/recipes?q=dragon").json()

    assert [r["slug"] for r in everything] == ["dragons", "robots"]
    assert [r["slug"] for r in found] == ["dragons"]
    assert found[0]["owner"] == "alice"
    assert found[0]["latest_version"] is None


def test_it_shows_a_recipe_with_its_document(api: Any, recipe: Recipe, doc: dict[str, Any]) -> None:
    body = api.get("/api/recipes/short-story").json()

    assert body["slug"] == "short-story"
    assert body["revision"] == 1
    assert body["document"] == doc
    assert body["versions"] == []
    assert body["shared_with_users"] == []


def test_it_lints_a_recipe_with_an_unreachable_step(api: Any, user: Any, actors: Any) -> None:
    doc = recipe_document(slug="with-orphan")
    doc["steps"][0]["branches"] = [
        {
            "name": "stop",
            "priority": 1,
            "when": {"type": "default"},
            "action": "END_RECIPE",
            "target": "@end",
        }
    ]
    doc["steps"].append(
        {
            "key": "orphan",
            "name": "Orphan",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Hi",
            "branches": [],
        }
    )
    imported = api.post("/api/recipes/import", doc, format="json")
    assert imported.status_code == 201

    response = api.get("/api/recipes/with-orphan/lint")

    assert response.status_code == 200
    warnings = response.json()["warnings"]
    assert any(w.startswith("steps[1]") and "orphan" in w for w in warnings), warnings
    assert imported.json()["warnings"] == warnings


def test_it_lints_a_clean_recipe_without_warnings(api: Any, recipe: Recipe) -> None:
    response = api.get("/api/recipes/short-story/lint")

    assert response.status_code == 200
    assert response.json() == {"warnings": []}


def test_it_serves_the_recipe_format_schema(api: Any) -> None:
    response = api.get("/api/recipes/format-schema")

    assert response.status_code == 200
    schema = response.json()
    assert schema["title"] == "Branchline recipe (format v1)"
    assert "steps" in schema["required"]


def test_the_recipe_list_costs_the_same_queries_for_one_recipe_or_many(
    api: Any, user: Any, actors: Any, django_assert_max_num_queries: Any
) -> None:
    for n in range(6):
        recipe = recipe_import(user=user, data=recipe_document(slug=f"r{n}")).recipe
        recipe_publish(recipe=recipe, user=user)

    with django_assert_max_num_queries(4):
        listed = api.get("/api/recipes/").json()

    assert [r["latest_version"] for r in listed] == [1] * 6


@pytest.mark.parametrize("slug", ["new", "import", "format-schema"])
def test_it_refuses_a_slug_that_names_a_page_or_route(api: Any, actors: Any, slug: str) -> None:
    answer = api.post("/api/recipes", recipe_document(slug=slug), format="json")

    assert answer.status_code == 400
    assert f"slug: '{slug}' is reserved; choose another" in answer.json()["errors"]
    assert not Recipe.objects.filter(slug=slug).exists()


@pytest.mark.parametrize("slug", [{}, [], 7, None])
def test_it_refuses_a_slug_that_is_no_text_with_a_clear_error(
    api: Any, actors: Any, slug: Any
) -> None:
    answer = api.post("/api/recipes", recipe_document(slug=slug, name="Odd"), format="json")

    assert answer.status_code == 400
    assert any(e.startswith("slug: ") for e in answer.json()["errors"]), answer.json()


@pytest.mark.parametrize("version", ["²", "9" * 5000, "-1", "x"])
def test_exporting_a_version_that_is_no_whole_number_is_a_clear_error(
    api: Any, recipe: Recipe, version: str
) -> None:
    answer = api.get(f"/api/recipes/{recipe.slug}/export", {"version": version})

    assert answer.status_code == 400
    assert answer.json()["errors"][0].startswith("version: no version")
