"""The reviewer's choice on a branch of a human step is picked from the step's options."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.forms.condition import ConditionForm
from editor.forms.document import DocumentContext, human_options
from workflows.models import Recipe

from .conftest import draft, htmx_post, live_answer

pytestmark = pytest.mark.django_db


def reviewer_choice(story: Recipe, web: Client, **posted: str) -> Any:
    """Open (or, with `apply`, edit) the `approved` branch of the review step."""
    return htmx_post(
        web,
        reverse("recipe-branch-panel", args=[story.slug]),
        draft(story),
        step=1,
        branch=0,
        element="b-1",
        **posted,
    )


def apply_choice(story: Recipe, web: Client, choice: str) -> Any:
    """Apply the `approved` branch as it is, with the reviewer's choice `choice`."""
    return live_answer(
        reviewer_choice(
            story,
            web,
            apply="1",
            name="approved",
            priority="1",
            active="on",
            action="QUALITY_APPROVED",
            target="@complete",
            **{"c-type": "human_decision", "c-operator": "user_choice", "c-value": choice},
        )
    )


def test_the_choice_is_a_menu_of_the_human_steps_options(story: Recipe, web: Client) -> None:
    page = reviewer_choice(story, web).content.decode()

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
    answer = apply_choice(story, web, "revise")

    assert answer["errors"] == {}
    assert answer["result"]["branch"]["when"] == {
        "type": "human_decision",
        "operator": "user_choice",
        "value": "revise",
    }


def test_an_option_the_step_does_not_offer_is_refused_beside_the_field(
    story: Recipe, web: Client
) -> None:
    before = draft(story)["steps"][1]["branches"][0]
    answer = apply_choice(story, web, "maybe")

    assert "unknown option 'maybe'" in " ".join(answer["errors"]["c-value"])
    # The branch's other fields apply; its condition stays what it was.
    assert answer["result"]["branch"]["when"] == before["when"]
