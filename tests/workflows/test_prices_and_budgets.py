"""Actor prices through the API and the admin (never a key), and a recipe's budget through
import, export and the lint."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import admin_form_data, openai_actor, recipe_document
from workflows.adapters import document_from_recipe
from workflows.models import Actor
from workflows.services import recipe_import

pytestmark = pytest.mark.django_db

SECRET = "sk-never-shown-5e1f"


def test_the_api_sets_and_shows_an_actors_prices_but_never_its_key(
    staff_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMOTE_KEY", SECRET)
    body = openai_actor(
        api_key_env="REMOTE_KEY",
        price_in_per_million="2.50",
        price_out_per_million=10,
        currency="EUR",
    )

    created = staff_api.post("/api/actors/", body, format="json")

    assert created.status_code == 201, created.content
    shown = created.json()
    assert (shown["price_in_per_million"], shown["price_out_per_million"]) == (
        "2.500000",
        "10.000000",
    )
    assert shown["currency"] == "EUR"
    assert SECRET not in created.content.decode()
    actor = Actor.objects.get(name="remote")
    assert (actor.price_in_per_million, actor.price_out_per_million) == (
        Decimal("2.5"),
        Decimal("10"),
    )


def test_an_actor_without_prices_has_none_and_costs_in_dollars_by_default(
    staff_api: APIClient,
) -> None:
    shown = staff_api.post("/api/actors/", openai_actor(), format="json").json()
    assert (shown["price_in_per_million"], shown["price_out_per_million"]) == (None, None)
    assert shown["currency"] == "USD"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"price_in_per_million": -1}, "price_in_per_million", "greater than or equal to 0"),
        ({"price_out_per_million": "lots"}, "price_out_per_million", "valid number"),
        ({"currency": "dollars"}, "currency", "no more than 3 characters"),
        ({"currency": "usd"}, "currency", "three-letter currency code"),
    ],
)
def test_the_api_refuses_a_bad_price_with_the_field(
    staff_api: APIClient, fields: dict[str, Any], field: str, message: str
) -> None:
    response = staff_api.post("/api/actors/", openai_actor(**fields), format="json")

    assert response.status_code == 400, response.content
    assert any(field in error and message in error for error in response.json()["errors"])
    assert not Actor.objects.filter(name="remote").exists()


def test_the_admin_edits_an_actors_prices(admin_client: Client, actors: Any) -> None:
    url = f"/admin/workflows/actor/{actors.writer.pk}/change/"
    data = {**admin_form_data(actors.writer), "price_in_per_million": "0.15", "currency": "GBP"}

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.content.decode()[:2000]
    actors.writer.refresh_from_db()
    assert (actors.writer.price_in_per_million, actors.writer.currency) == (Decimal("0.15"), "GBP")


# -- a recipe's budget -----------------------------------------------------------------------


def test_a_budget_is_imported_and_exported_as_written(user: Any, actors: Any) -> None:
    document = recipe_document(budget={"max_tokens": 20000, "max_cost": 0.75, "max_calls": 12})

    recipe = recipe_import(user=user, data=document).recipe

    assert recipe.budget == {"max_tokens": 20000, "max_cost": 0.75, "max_calls": 12}
    assert document_from_recipe(recipe) == document


def test_a_recipe_without_a_budget_exports_without_one(user: Any, actors: Any) -> None:
    recipe = recipe_import(user=user, data=recipe_document(budget=None)).recipe
    assert recipe.budget is None
    assert "budget" not in document_from_recipe(recipe)


def test_an_import_with_a_bad_budget_is_refused_with_each_error_at_its_path(
    api: APIClient, actors: Any
) -> None:
    document = recipe_document(budget={"max_calls": 0, "max_cost": "cheap", "max_tokenz": 5})

    response = api.post("/api/recipes/import", document, format="json")

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any(e.startswith("budget.max_calls:") for e in errors), errors
    assert any(e.startswith("budget.max_cost:") for e in errors), errors
    assert any(e.startswith("budget.max_tokenz:") for e in errors), errors


def test_lint_warns_about_a_budget_condition_the_budget_never_lets_hold(
    api: APIClient, actors: Any
) -> None:
    document = recipe_document(budget={"max_cost": 1})
    document["steps"][0]["branches"] = [
        {
            "name": "broke",
            "priority": 1,
            "when": {"type": "budget", "measure": "cost", "operator": "greater_equal", "value": 2},
            "action": "END_RECIPE",
            "target": "@end",
        }
    ]

    response = api.post("/api/recipes/import", document, format="json")

    assert response.status_code == 201, response.content
    assert any("budget.max_cost 1 stops it first" in w for w in response.json()["warnings"])
