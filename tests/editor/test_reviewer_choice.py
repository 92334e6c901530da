"""The reviewer's choice on a branch of a human step is picked from the step's options."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from editor.forms.condition import ConditionForm
from editor.forms.document import DocumentContext, human_options
from workflows.models import Recipe

from .conftest import draft, htmx_post

pytestmark = pytest.mark.django_db


def reviewer_choice(story: Recipe, web: Client, **posted: str) -> tuple[str, dict | None]:
    """Open (or apply) the `approved` branch of the review step; return the page and result."""
    response = htmx_post(
        web,
        reverse("recipe-branch-panel", args=[story.slug]),
        draft(story),
        step=1,
        branch=0,
        element="b-1",
        **posted,
    )
    return response.content.decode(), response.context["result"]


def test_the_choice_is_a_menu_of_the_human_steps_options(story: Recipe, web: Client) -> None:
    page, _ = reviewer_choice(story, web)

    assert '<select name="c-value"' in page
    for option in ("approve", "reject", "revise"):
        assert f'<option value="{option}"' in page
    assert '<option value="approve" selected>' in page


def test_the_menu_lists_the_options_the_step_names() -> None:
    step = {"key": "check", "kind": "human", "options": ["ship", "hold"], "branches": []}
    context = DocumentContext({"steps": [step]}, step_options=human_options(step))

    form = ConditionForm(initial={"type": "human_decision", "value": "ship"}, context=context)

    assert [c[0] for c in form.fields["value"].choices] == ["", "ship", "hold"]


def test_a_value_the_step_does_not_list_is_kept_in_the_menu() -> None:
    step = {"key": "check", "kind": "human", "branches": []}
    context = DocumentContext({"steps": [step]}, step_options=human_options(step))

    form = ConditionForm(
        initial={"type": "human_decision", "value": "approve|revise"}, context=context
    )

    assert ("approve|revise", "approve|revise") in form.fields["value"].choices


def test_a_step_that_is_not_human_keeps_the_typed_value() -> None:
    assert human_options({"kind": "llm"}) is None
    form = ConditionForm(
        initial={"type": "human_decision", "value": "approve"},
        context=DocumentContext({"steps": []}),
    )

    assert not hasattr(form.fields["value"], "choices")


def test_applying_a_picked_option_writes_it(story: Recipe, web: Client) -> None:
    _, result = reviewer_choice(
        story,
        web,
        apply="1",
        name="approved",
        priority="1",
        active="on",
        action="QUALITY_APPROVED",
        target="@complete",
        **{"c-type": "human_decision", "c-operator": "user_choice", "c-value": "revise"},
    )

    assert result is not None
    assert result["branch"]["when"] == {
        "type": "human_decision",
        "operator": "user_choice",
        "value": "revise",
    }


def test_an_option_the_step_does_not_offer_is_refused_beside_the_field(
    story: Recipe, web: Client
) -> None:
    page, result = reviewer_choice(
        story,
        web,
        apply="1",
        name="approved",
        priority="1",
        active="on",
        action="QUALITY_APPROVED",
        target="@complete",
        **{"c-type": "human_decision", "c-operator": "user_choice", "c-value": "maybe"},
    )

    assert result is None
    assert "unknown option &#x27;maybe&#x27;" in page
