"""Drafts save with errors (kept as written); only publishing, and test runs, need them clean."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.test import Client

from tests.factories import JUDGE, WRITER, ActorFactory
from tests.workflows.test_api_garbage import DOCUMENT_GARBAGE
from workflows.adapters import document_from_recipe
from workflows.models import Actor, Recipe
from workflows.selectors import actor_users
from workflows.services import recipe_draft_save, recipe_draft_snapshot, recipe_publish
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db

RECIPE = "/api/recipes/short-story"


def broken(doc: dict[str, Any]) -> dict[str, Any]:
    """Return `doc` half-edited: a branch to a step not drawn yet, and a step with no key."""
    doc = copy.deepcopy(doc)
    doc["steps"][0]["branches"].append(
        {"name": "later", "priority": 5, "when": {"type": "default"}, "target": "not_yet"}
    )
    doc["steps"].append({"name": "Half drawn", "kind": "llm", "prompt": "", "branches": []})
    return doc


def test_it_saves_a_draft_with_errors_as_written(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    draft = broken(doc)

    response = api.put(RECIPE, {"document": draft, "revision": 1}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["revision"] == 2
    assert body["document"] == draft
    assert any(e.startswith("steps[0].branches[") for e in body["errors"])
    assert any(e.startswith("steps[1]") for e in body["errors"])
    # Read back exactly as written, by the API and by export; the rows keep the last valid draft.
    assert api.get(RECIPE).json()["document"] == draft
    assert api.get(f"{RECIPE}/export").json() == draft
    assert recipe.steps.count() == 1


def test_it_answers_no_errors_for_a_valid_draft(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    doc["name"] = "Fine"

    response = api.put(RECIPE, {"document": doc, "revision": 1}, format="json")

    assert response.json()["errors"] == []


def test_it_refuses_to_publish_a_draft_with_errors(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    api.put(RECIPE, {"document": broken(doc), "revision": 1}, format="json")

    response = api.post(f"{RECIPE}/publish")

    assert response.status_code == 400
    assert any(e.startswith("steps[0].branches[") for e in response.json()["errors"])
    assert not recipe.versions.exists()


def test_it_refuses_a_test_run_of_a_draft_with_errors(
    user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    recipe_draft_save(recipe=recipe, document=broken(doc))

    with pytest.raises(RecipeRejected):
        recipe_draft_snapshot(recipe=recipe, user=user)

    assert not recipe.versions.exists()


def test_a_fixed_draft_goes_back_to_rows_and_publishes(
    user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    recipe_draft_save(recipe=recipe, document=broken(doc))
    doc["steps"][0]["prompt"] = "Write a long story about {topic}"

    saved = recipe_draft_save(recipe=recipe, document=doc, expected_revision=2)

    assert saved.errors == []
    recipe.refresh_from_db()
    assert recipe.draft_document is None
    assert recipe.steps.get().prompt == "Write a long story about {topic}"
    assert recipe_publish(recipe=recipe, user=user).document == doc


def test_it_refuses_a_stale_draft_with_errors_and_keeps_the_saved_one(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    first = broken(doc)
    api.put(RECIPE, {"document": first, "revision": 1}, format="json")
    second = copy.deepcopy(first)
    second["name"] = "Mine"

    response = api.put(RECIPE, {"document": second, "revision": 1}, format="json")

    assert response.status_code == 409
    assert api.get(RECIPE).json()["document"] == first


def test_a_rename_reaches_a_draft_with_errors(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    api.put(RECIPE, {"document": broken(doc), "revision": 1}, format="json")

    renamed = api.patch(RECIPE, {"name": "Tiny Tales"}, format="json")

    assert renamed.json()["document"]["name"] == "Tiny Tales"
    assert renamed.json()["document"]["steps"][1]["name"] == "Half drawn"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"slug": "renamed"}, "slug: the slug of a recipe cannot change"),
        ({"steps": "none"}, "steps: a list of step objects"),
        ({"steps": [None]}, "steps[0]: a step object"),
        ({"steps": [{"key": "a", "branches": "x"}]}, "steps[0].branches: a list of branch objects"),
        ({"steps": [{"key": "a", "branches": [1]}]}, "steps[0].branches: a list of branch objects"),
    ],
)
def test_it_refuses_only_what_cannot_be_kept_or_drawn(
    api: Any, recipe: Recipe, doc: dict[str, Any], change: dict[str, Any], error: str
) -> None:
    response = api.put(RECIPE, {"document": {**doc, **change}, "revision": 1}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"][0].startswith(error)
    recipe.refresh_from_db()
    assert (recipe.revision, recipe.draft_document) == (1, None)


def test_it_refuses_a_draft_no_database_column_holds(recipe: Recipe, doc: dict[str, Any]) -> None:
    # The API's parser refuses these first; the service refuses them for every other caller.
    with pytest.raises(RecipeRejected) as refused:
        recipe_draft_save(recipe=recipe, document={**doc, "name": "nul\x00"})

    assert refused.value.errors[0].startswith("name: ")
    recipe.refresh_from_db()
    assert recipe.draft_document is None


def floats(value: Any) -> Any:
    """Return `value` with every number as a float."""
    if isinstance(value, dict):
        return {k: floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


@pytest.mark.parametrize(("name", "document"), DOCUMENT_GARBAGE)
def test_every_page_of_any_draft_that_saved_answers(
    api: Any, user: Any, recipe: Recipe, name: str, document: Any
) -> None:
    recipe_publish(recipe=recipe, user=user)  # so the diff has a version to compare with
    saved = api.put(RECIPE, {"document": document, "revision": 1}, format="json")
    page = Client()
    page.force_login(user)

    assert saved.status_code < 500
    assert page.get("/recipes/short-story/").status_code == 200
    for url in (
        "/recipes/short-story/tests/",
        "/recipes/short-story/versions/diff/?a=1&b=draft",
    ):
        assert page.get(url).status_code == 200, url
    for data in ({}, {"start": "1", "input_topic": "the sea"}):
        # The test-run panel reads the saved draft, and refuses to run one with errors.
        assert page.post("/recipes/short-story/testrun/", data).status_code == 200
    for url in (f"{RECIPE}/lint", f"{RECIPE}/export"):
        assert api.get(url).status_code == 200, url
    published = api.post(f"{RECIPE}/publish")
    if saved.status_code == 200:
        # As written; jsonb gives 1e308 back as the integer it equals, hence the floats.
        held = document_from_recipe(Recipe.objects.get(pk=recipe.pk))
        assert floats(held) == floats({**document, "slug": "short-story"})
        assert published.status_code == (400 if saved.json()["errors"] else 201)


def test_a_draft_that_names_an_actor_created_later_publishes_as_rows(
    api: Any, recipe: Recipe, doc: dict[str, Any], user: Any
) -> None:
    doc["actors"]["late"] = "arrives-later"
    doc["steps"][0]["actor"] = "late"
    saved = recipe_draft_save(recipe=recipe, document=doc)
    assert saved.errors == ["actors.late: unknown actor 'arrives-later'"]
    ActorFactory(name="arrives-later")

    version = recipe_publish(recipe=recipe, user=user)

    recipe.refresh_from_db()
    assert recipe.draft_document is None
    assert recipe.actor_aliases.get(alias="late").actor.name == "arrives-later"
    assert version.document == document_from_recipe(recipe)
    assert version.document["actors"]["late"] == "arrives-later"


def test_an_actor_a_draft_with_errors_names_cannot_be_deleted_and_a_rename_reaches_it(
    recipe: Recipe, doc: dict[str, Any], staff_api: Any
) -> None:
    writer = Actor.objects.get(name=doc["actors"]["writer"])
    recipe_draft_save(recipe=recipe, document=broken(doc))

    deleted = staff_api.delete(f"/api/actors/{writer.pk}/")
    renamed = staff_api.patch(f"/api/actors/{writer.pk}/", {"name": "new-writer"}, format="json")

    assert deleted.status_code == 409
    assert "short-story" in deleted.json()["errors"][0]
    assert renamed.status_code == 200, renamed.content
    recipe.refresh_from_db()
    assert recipe.draft_document["actors"]["writer"] == "new-writer"


def test_an_actor_only_the_rows_of_a_draft_with_errors_name_is_not_held_by_them(
    recipe: Recipe, doc: dict[str, Any]
) -> None:
    doc["actors"] = {"other": JUDGE}
    doc["steps"][0]["actor"] = "other"
    recipe_draft_save(recipe=recipe, document=broken(doc))

    users = actor_users(name=WRITER)

    assert users.drafts == ()


def test_a_draft_with_errors_renames_the_recipe(
    api: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    draft = broken({**doc, "name": "New name", "description": "Now longer"})

    response = api.put(RECIPE, {"document": draft, "revision": 1}, format="json")

    assert response.json()["name"] == "New name"
    recipe.refresh_from_db()
    assert (recipe.name, recipe.description) == ("New name", "Now longer")
    # A name the recipe cannot take stays where it was, in the document only.
    api.put(RECIPE, {"document": {**draft, "name": ""}, "revision": 2}, format="json")
    recipe.refresh_from_db()
    assert recipe.name == "New name"
