"""A recipe's `webhooks` go through import, export and publishing as written, and a wrong one
is refused whole at its path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.triggers.hooks import hooked_document
from workflows.adapters import document_from_recipe
from workflows.services import recipe_import, recipe_publish
from workflows.validators import RecipeRejected

pytestmark = pytest.mark.django_db


def test_it_exports_and_publishes_the_hooks_as_imported(user: Any, actors: Any) -> None:
    document = hooked_document()
    recipe = recipe_import(user=user, data=document).recipe

    assert document_from_recipe(recipe) == document
    version = recipe_publish(recipe=recipe, user=user)
    assert version.document["webhooks"] == document["webhooks"]


def test_a_recipe_without_hooks_exports_none(recipe: Any) -> None:
    assert "webhooks" not in document_from_recipe(recipe)


def test_it_refuses_a_hook_expression_that_does_not_compile(user: Any, actors: Any) -> None:
    document = hooked_document()
    document["webhooks"][0]["inputs"] = {"topic": "issue.[title"}

    with pytest.raises(RecipeRejected) as caught:
        recipe_import(user=user, data=document)

    assert [e.split(":")[0] for e in caught.value.errors] == ["webhooks[0].inputs.topic"]
