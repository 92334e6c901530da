"""Actor `capabilities` and step `requires`: stored, checked when written and at publish."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Actor, Recipe, RecipeVersion
from workflows.services import recipe_import, recipe_publish
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db


def needing(*requires: object) -> dict[str, Any]:
    doc = recipe_document(slug="looks", name="Looks")
    doc["steps"][0]["requires"] = list(requires)
    return doc


def test_publish_refuses_a_step_whose_actor_lacks_a_capability(user: Any, actors: Any) -> None:
    # Imported while the actor declared nothing; its capabilities were declared since.
    recipe = recipe_import(user=user, data=needing("vision", "tools")).recipe
    Actor.objects.filter(pk=actors.writer.pk).update(capabilities=["tools"])

    with pytest.raises(RecipeRejected) as caught:
        recipe_publish(recipe=recipe, user=user)

    key = recipe.steps.get().key
    assert f"steps[0] ('{key}').requires: actor 'writer' lacks vision" in caught.value.errors
    assert not RecipeVersion.objects.exists()


def test_publish_accepts_a_capable_actor_and_keeps_the_requirement(user: Any, actors: Any) -> None:
    Actor.objects.filter(pk=actors.writer.pk).update(capabilities=["vision", {"context": 8192}])
    recipe = recipe_import(user=user, data=needing("vision", {"context": 4096})).recipe

    version = recipe_publish(recipe=recipe, user=user)

    assert version.document["steps"][0]["requires"] == ["vision", {"context": 4096}]
    assert document_from_recipe(recipe)["steps"][0]["requires"] == ["vision", {"context": 4096}]


def test_an_actor_without_declared_capabilities_is_not_checked(user: Any, actors: Any) -> None:
    assert actors.writer.capabilities is None
    recipe = recipe_import(user=user, data=needing("vision")).recipe

    assert recipe_publish(recipe=recipe, user=user).number == 1


def test_the_api_shows_and_checks_an_actors_capabilities(
    api: Any, staff_api: Any, actors: Any
) -> None:
    url = f"/api/actors/{actors.writer.pk}/"
    changed = staff_api.patch(url, {"capabilities": ["vision", {"context": 32768}]}, format="json")
    refused = staff_api.patch(url, {"capabilities": ["telepathy"]}, format="json")

    assert changed.status_code == 200, changed.json()
    assert changed.json()["capabilities"] == ["vision", {"context": 32768}]
    assert refused.status_code == 400
    assert refused.json()["errors"][0].startswith(
        "capabilities: [0]: unknown capability 'telepathy'"
    )
    assert api.get(url).json()["capabilities"] == ["vision", {"context": 32768}]


def test_publish_through_the_api_names_the_step_the_actor_and_the_capability(
    api: Any, user: Any, actors: Any
) -> None:
    recipe: Recipe = recipe_import(user=user, data=needing({"context": 8192})).recipe
    Actor.objects.filter(pk=actors.writer.pk).update(capabilities=[{"context": 2048}])
    key = recipe.steps.get().key

    response = api.post(f"/api/recipes/{recipe.slug}/publish", {}, format="json")

    assert response.status_code == 400
    assert (
        f"steps[0] ('{key}').requires: actor 'writer' lacks context >= 8192 (it has 2048)"
        in response.json()["errors"]
    )


def test_import_refuses_a_step_whose_actor_lacks_a_capability(api: Any, actors: Any) -> None:
    Actor.objects.filter(pk=actors.writer.pk).update(capabilities=["tools"])

    response = api.post("/api/recipes/import", needing("vision"), format="json")

    assert response.status_code == 400
    assert any("requires: actor 'writer' lacks vision" in e for e in response.json()["errors"])


def test_an_unknown_requirement_is_refused_on_import(api: Any, actors: Any) -> None:
    response = api.post("/api/recipes/import", needing("x-ray"), format="json")

    assert response.status_code == 400
    assert any(
        "steps[0].requires[0]: unknown capability 'x-ray'" in e for e in response.json()["errors"]
    )
