"""The editor's step and branch panels for intent steps and criteria_met conditions."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.forms.branch import BranchPanel
from editor.forms.document import DocumentContext
from editor.forms.step import StepForm
from workflows.models import Recipe

from .conftest import draft, htmx_post, story_document
from .test_forms import branch_data, step_data

pytestmark = pytest.mark.django_db

UNDERSTAND = {
    "key": "understand",
    "name": "Understand",
    "kind": "intent",
    "actor": "writer",
    "prompt": "{topic}",
    "max_attempts": 4,
    "branches": [],
}


def intent_document() -> dict[str, Any]:
    doc = story_document()
    doc["steps"].insert(0, dict(UNDERSTAND))
    return doc


def test_the_step_form_shows_and_writes_an_intent_steps_attempts(story: Recipe) -> None:
    doc = intent_document()
    context = DocumentContext(doc)
    assert StepForm.initial_from(doc["steps"][0])["intent_max_attempts"] == 4
    form = StepForm(step_data(doc, 0), context=context, index=0)
    assert form.is_valid(), form.errors
    assert form.result == {key: v for key, v in UNDERSTAND.items() if key != "branches"}

    form = StepForm(step_data(doc, 0, intent_max_attempts=2), context=context, index=0)
    assert form.is_valid(), form.errors
    assert form.result is not None and form.result["max_attempts"] == 2


def test_the_attempts_of_an_intent_step_are_not_written_for_another_kind(story: Recipe) -> None:
    doc = intent_document()
    form = StepForm(
        step_data(doc, 0, kind="llm", intent_max_attempts=2), context=DocumentContext(doc), index=0
    )
    assert form.is_valid(), form.errors
    assert form.result is not None and "max_attempts" not in form.result


def test_the_step_form_refuses_attempts_out_of_bounds(story: Recipe) -> None:
    doc = intent_document()
    form = StepForm(
        step_data(doc, 0, intent_max_attempts=11), context=DocumentContext(doc), index=0
    )
    assert not form.is_valid()
    assert "intent_max_attempts" in form.errors


def test_the_step_panel_offers_the_intent_kind_and_its_attempts(story: Recipe, web: Client) -> None:
    response = htmx_post(
        web, reverse("recipe-step-panel", args=[story.slug]), draft(story), step=0, element="s-0"
    )
    page = response.content.decode()
    assert '<option value="intent">Intent (request → success criteria)</option>' in page
    assert 'data-kind-only="intent"' in page
    assert 'name="intent_max_attempts"' in page


def test_the_editor_palette_and_catalog_hold_the_intent_kind_and_criteria_met(
    story: Recipe, web: Client
) -> None:
    page = web.get(reverse("recipe-editor", args=[story.slug])).content.decode()
    assert 'data-add-step="intent"' in page
    assert "Add Intent (request → success criteria) step</span>" in page
    assert '"type": "criteria_met"' in page


@pytest.mark.parametrize(
    "when",
    [
        {"type": "criteria_met", "operator": "all", "intent_step": "understand"},
        {
            "type": "criteria_met",
            "operator": "at_least",
            "value": 0.5,
            "intent_step": "understand",
            "evaluator": "judge",
        },
    ],
)
def test_the_branch_panel_round_trips_a_criteria_met_condition(
    story: Recipe, when: dict[str, Any]
) -> None:
    doc = intent_document()
    panel = BranchPanel(
        context=DocumentContext(doc),
        step_index=1,
        branch_index=0,
        data=branch_data(doc, 1, 0, when=when),
    )
    assert panel.is_valid(), (panel.form.errors, panel.condition.has_errors)
    assert panel.result["when"] == when


def test_the_branch_panel_shows_a_criteria_met_path_error_beside_the_condition(
    story: Recipe,
) -> None:
    doc = intent_document()
    when = {"type": "criteria_met", "operator": "all", "intent_step": "write"}
    panel = BranchPanel(
        context=DocumentContext(doc),
        step_index=1,
        branch_index=0,
        data=branch_data(doc, 1, 0, when=when),
    )
    assert not panel.is_valid()
    assert panel.condition.form.errors["intent_step"] == [
        "step 'write' is not an intent step (its kind is llm)"
    ]
