"""The recipe settings panel sets, changes and clears a recipe's budget, with field errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from workflows.models import Recipe

from .conftest import draft, htmx_post, live_answer

pytestmark = pytest.mark.django_db


def settings_fields(**budget: str) -> dict[str, str]:
    """Return the panel's fields for the story recipe as it is, with `budget`'s limits."""
    fields = {
        "recipe-name": "Story",
        "recipe-description": "",
        "inputs-TOTAL_FORMS": "1",
        "inputs-INITIAL_FORMS": "1",
        "inputs-0-name": "topic",
        "inputs-0-type": "string",
        "inputs-0-required": "on",
        "actors-TOTAL_FORMS": "3",
        "actors-INITIAL_FORMS": "3",
        "actors-0-alias": "writer",
        "actors-0-reference": "editor-writer",
        "actors-1-alias": "judge",
        "actors-1-reference": "editor-judge",
        "actors-2-alias": "editors",
        "actors-2-reference": "@human:editor-reviewers",
    }
    return fields | {f"budget-{name}": value for name, value in budget.items()}


def apply(web: Client, recipe: Recipe, document: dict[str, Any], **budget: str) -> Any:
    url = reverse("recipe-settings-panel", args=[recipe.slug])
    return live_answer(htmx_post(web, url, document, apply="1", **settings_fields(**budget)))


def test_it_opens_with_the_documents_limits(story: Recipe, web: Client) -> None:
    document = {**draft(story), "budget": {"max_cost": 0.5, "max_calls": 12}}

    page = htmx_post(web, reverse("recipe-settings-panel", args=[story.slug]), document)

    html = page.content.decode()
    assert "Budget per run" in html
    assert 'name="budget-max_cost" value="0.5"' in html
    assert 'name="budget-max_calls" value="12"' in html


def test_applying_sets_the_limits_given(story: Recipe, web: Client) -> None:
    answer = apply(web, story, draft(story), max_cost="0.25", max_calls="8", max_tokens="")

    assert answer["result"]["budget"] == {"max_cost": 0.25, "max_calls": 8}


def test_emptying_every_field_clears_the_budget(story: Recipe, web: Client) -> None:
    document = {**draft(story), "budget": {"max_calls": 3}}

    answer = apply(web, story, document, max_calls="")

    assert answer["result"]["budget"] is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_calls", "0", "greater than or equal to 1"),
        ("max_tokens", "many", "Enter a whole number"),
        ("max_cost", "-2", "greater than or equal to"),
        ("max_cost", "0.000000001", "no more than 8 decimal places"),
        ("max_seconds", "0.5", "greater than or equal to 1"),
    ],
)
def test_a_bad_limit_is_refused_at_its_field(
    story: Recipe, web: Client, field: str, value: str, message: str
) -> None:
    answer = apply(web, story, draft(story), **{field: value})

    assert message in " ".join(answer["errors"][f"budget-{field}"])
    # The rest of the panel applies, with the recipe's budget as it was (it had none).
    assert answer["result"]["budget"] is None
