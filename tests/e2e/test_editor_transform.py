"""A transform step in the browser: added from the palette with a starting expression, a bad
expression shown on its field, and a test run that computes its facts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.models import Run
from tests.editor.conftest import story_document
from workflows.services import recipe_import

from .conftest import BrowserPage
from .editor_page import add_step, apply_panel, click_settled

pytestmark = pytest.mark.e2e

OWLS = {"owls": [{"name": "barn", "weight": 0.5}, {"name": "snowy", "weight": 2}]}


def test_a_transform_step_from_the_palette_computes_its_facts_in_a_test_run(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None, run_worker: Any
) -> None:
    doc = story_document(slug="owl-tally", name="Owl tally")
    doc["steps"] = [
        {"key": "list", "name": "List", "actor": "writer", "prompt": "List owls about {topic}."}
    ]
    recipe = recipe_import(user=e2e_user, data=doc).recipe
    page = browser_page.open_editor(recipe.slug)

    add_step(page, "transform")
    page.wait_for_selector("#panel [name=set]")
    assert json.loads(page.input_value("#panel [name=set]")) == {
        "fact_count": "length(keys(facts))"
    }
    page.fill("#panel [name=set]", json.dumps({"count": "length(steps.list.owls"}))
    page.wait_for_selector("#panel .field.invalid:has([name=set]) .field-error")
    error = page.inner_text("#panel .field.invalid:has([name=set]) .field-error")
    assert error.startswith("count: Invalid jmespath expression: Incomplete expression")

    expressions = {"count": "length(steps.list.owls)", "heaviest": "max_by(owls, &weight).name"}
    page.fill("#panel [name=set]", json.dumps(expressions))
    apply_panel(page)

    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    page.fill("#panel-testrun [name=input_topic]", "the night")
    page.fill("#panel-testrun [name=script_writer]", json.dumps(OWLS))
    click_settled(page, "#panel-testrun button.primary")
    page.wait_for_function("branchline.testRunFinished", timeout=30000)
    page.wait_for_selector("#testrun-result .run-result")
    assert "succeeded" in page.inner_text("#testrun-result")
    browser_page.screenshot("transform-test-run")

    run = Run.objects.get(recipe=recipe)
    tally = run.steps.get(kind="transform")
    assert json.loads(tally.response) == {"count": 2, "heaviest": "snowy"}
