"""The editor's step panel for transform steps (`set`) and an llm step's output schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.forms.document import DocumentContext
from editor.forms.step import StepForm
from workflows.models import Recipe

from .conftest import draft, htmx_post, story_document
from .test_forms import step_data

pytestmark = pytest.mark.django_db

TALLY = {"key": "tally", "name": "Tally", "kind": "transform", "set": {"n": "length(owls)"}}
SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


def with_tally() -> dict[str, Any]:
    doc = story_document()
    doc["steps"].insert(0, {**TALLY, "branches": []})
    return doc


def test_the_step_form_writes_a_transform_steps_expressions(story: Recipe) -> None:
    doc = with_tally()
    assert StepForm.initial_from(doc["steps"][0])["set"] == TALLY["set"]
    expressions = {"n": "length(owls)", "heaviest": "max_by(owls, &weight).name"}

    form = StepForm(
        step_data(doc, 0, set=json.dumps(expressions)), context=DocumentContext(doc), index=0
    )

    assert form.is_valid(), form.errors
    assert form.result is not None and form.result["set"] == expressions


def test_the_step_form_shows_a_bad_expression_on_its_field(story: Recipe) -> None:
    doc = with_tally()

    form = StepForm(
        step_data(doc, 0, set=json.dumps({"n": "length(owls"})),
        context=DocumentContext(doc),
        index=0,
    )

    assert not form.is_valid()
    assert form.errors["set"] == [
        "n: Invalid jmespath expression: Incomplete expression (at column 11)"
    ]


def test_the_step_form_writes_an_output_schema_and_shows_its_errors(story: Recipe) -> None:
    doc = story_document()
    context = DocumentContext(doc)

    form = StepForm(
        step_data(doc, 0, output_schema=json.dumps(SCHEMA), output_schema_attempts=3),
        context=context,
        index=0,
    )
    assert form.is_valid(), form.errors
    assert form.result is not None
    assert (form.result["output_schema"], form.result["output_schema_attempts"]) == (SCHEMA, 3)

    bad = {"type": "object", "properties": {"title": {"type": "text"}}}
    form = StepForm(step_data(doc, 0, output_schema=json.dumps(bad)), context=context, index=0)
    assert not form.is_valid()
    assert form.errors["output_schema"] == [
        "properties.title.type: 'text' is not valid under any of the given schemas"
    ]


def test_the_step_panel_offers_the_transform_kind_and_the_fields(
    story: Recipe, web: Client
) -> None:
    response = htmx_post(
        web, reverse("recipe-step-panel", args=[story.slug]), draft(story), step=0, element="s-0"
    )
    page = response.content.decode()
    assert '<option value="transform">Transform (compute facts)</option>' in page
    assert 'name="set"' in page and 'data-kind-only="transform"' in page
    assert 'name="output_schema"' in page and 'name="output_schema_attempts"' in page
