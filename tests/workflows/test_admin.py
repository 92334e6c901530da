"""The admin pages load for a superuser, and published versions are read-only there."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(user: Any, recipe: Recipe) -> RecipeVersion:
    return recipe_publish(recipe=recipe, user=user, note="first")


def pages(actors: Any, recipe: Recipe, version: RecipeVersion) -> list[str]:
    step = recipe.steps.get()
    return [
        "/admin/",
        "/admin/workflows/",
        "/admin/workflows/actor/",
        f"/admin/workflows/actor/{actors.writer.pk}/change/",
        f"/admin/workflows/actor/{actors.editors.pk}/change/",
        "/admin/workflows/actor/add/",
        "/admin/workflows/recipe/",
        f"/admin/workflows/recipe/{recipe.pk}/change/",
        "/admin/workflows/step/",
        f"/admin/workflows/step/{step.pk}/change/",
        "/admin/workflows/recipeversion/",
        f"/admin/workflows/recipeversion/{version.pk}/change/",
        "/admin/workflows/recipe/?q=short",
        "/admin/workflows/actor/?kind__exact=human",
    ]


def test_the_admin_pages_load(
    admin_client: Client, actors: Any, recipe: Recipe, version: RecipeVersion
) -> None:
    for url in pages(actors, recipe, version):
        response = admin_client.get(url)
        assert response.status_code == 200, url


def test_a_version_is_shown_read_only(admin_client: Client, version: RecipeVersion) -> None:
    url = f"/admin/workflows/recipeversion/{version.pk}/change/"

    page = admin_client.get(url).content.decode()

    assert "&quot;slug&quot;: &quot;short-story&quot;" in page
    assert 'name="note"' not in page
    assert 'name="_save"' not in page


def test_a_version_cannot_be_changed_in_the_admin(
    admin_client: Client, version: RecipeVersion
) -> None:
    url = f"/admin/workflows/recipeversion/{version.pk}/change/"

    response = admin_client.post(url, {"note": "rewritten", "document": "{}"})

    assert response.status_code == 403
    version.refresh_from_db()
    assert version.note == "first"


def test_a_version_cannot_be_added_in_the_admin(admin_client: Client) -> None:
    assert admin_client.get("/admin/workflows/recipeversion/add/").status_code == 403


def test_the_admin_is_closed_to_other_users(user: Any, recipe: Recipe) -> None:
    client = Client()
    client.force_login(user)

    response = client.get("/admin/workflows/recipe/")

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
