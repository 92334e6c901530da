"""Publishing freezes a draft into numbered, immutable versions."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Branch, Recipe, RecipeVersion
from workflows.services import RecipeConflict, recipe_import, recipe_publish, recipe_update
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db


def test_it_numbers_versions_from_one(user: Any, recipe: Recipe) -> None:
    first = recipe_publish(recipe=recipe, user=user, note="first cut")
    second = recipe_publish(recipe=recipe, user=user)

    assert (first.number, second.number) == (1, 2)
    assert (first.note, first.created_by) == ("first cut", user)
    assert recipe.latest_version == second
    assert first.document == document_from_recipe(recipe)


def test_it_numbers_versions_per_recipe(user: Any, recipe: Recipe, actors: Any) -> None:
    other = recipe_import(user=user, data=recipe_document(slug="other")).recipe
    recipe_publish(recipe=recipe, user=user)
    recipe_publish(recipe=recipe, user=user)

    assert recipe_publish(recipe=other, user=user).number == 1


def test_a_version_cannot_be_changed(user: Any, recipe: Recipe) -> None:
    version = recipe_publish(recipe=recipe, user=user)
    version.note = "rewritten history"
    version.document = {"format": "forged"}

    with pytest.raises(ValidationError, match="cannot be changed"):
        version.save()

    version.refresh_from_db()
    assert version.note == ""
    assert version.document["slug"] == "short-story"


def test_editing_the_draft_leaves_the_version_unchanged(
    user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    version = recipe_publish(recipe=recipe, user=user)
    frozen = dict(version.document)
    doc["name"] = "A Different Story"
    doc["steps"][0]["prompt"] = "Write a poem about {topic}"

    recipe_update(recipe=recipe, document=doc)

    version.refresh_from_db()
    assert version.document == frozen
    assert version.document["steps"][0]["prompt"] == "Write a short story about {topic}"
    assert document_from_recipe(recipe)["steps"][0]["prompt"] == "Write a poem about {topic}"


def test_it_refuses_to_publish_a_draft_saved_since_the_caller_read_it(
    user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    seen = recipe.revision
    recipe_update(recipe=recipe, document={**doc, "name": "Saved elsewhere"})

    with pytest.raises(RecipeConflict, match="saved elsewhere"):
        recipe_publish(recipe=recipe, user=user, expected_revision=seen)

    assert not recipe.versions.exists()
    version = recipe_publish(recipe=recipe, user=user, expected_revision=recipe.revision)
    assert version.document["name"] == "Saved elsewhere"


def test_it_refuses_to_publish_a_draft_that_became_invalid(user: Any, recipe: Recipe) -> None:
    step = recipe.steps.get()
    Branch.objects.create(
        step=step,
        name="lost",
        priority=1,
        condition={"type": "default"},
        action="CONTINUE",
        target="nowhere",
    )

    with pytest.raises(RecipeRejected) as caught:
        recipe_publish(recipe=recipe, user=user)

    assert any(e.startswith("steps[0].branches[0].target: ") for e in caught.value.errors)
    assert not RecipeVersion.objects.exists()


def test_it_refuses_to_publish_through_the_api_with_the_errors(api: Any, recipe: Recipe) -> None:
    Branch.objects.create(
        step=recipe.steps.get(),
        name="bad_operator",
        priority=1,
        condition={"type": "length_check", "operator": "lessthan", "value": 3},
        action="CONTINUE",
        target="@complete",
    )

    response = api.post("/api/recipes/short-story/publish", {"note": "v1"}, format="json")

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any(
        e.startswith("steps[0].branches[0].when.operator: unknown operator 'lessthan'")
        for e in errors
    ), errors
    assert not RecipeVersion.objects.exists()


def test_it_publishes_through_the_api(api: Any, recipe: Recipe) -> None:
    first = api.post("/api/recipes/short-story/publish", {"note": "ready"}, format="json")
    second = api.post("/api/recipes/short-story/publish")

    assert first.status_code == 201
    assert first.json()["number"] == 1
    assert first.json()["note"] == "ready"
    assert first.json()["created_by"] == "alice"
    assert second.status_code == 201
    assert second.json()["number"] == 2
    versions = api.get("/api/recipes/short-story/versions").json()
    assert [v["number"] for v in versions] == [2, 1]
    assert api.get("/api/recipes/short-story").json()["latest_version"] == 2
