"""The step panel's visual builders in the browser: a decision tree and classification routes
edited without JSON come back unchanged, or changed only where they were edited, and the JSON
"advanced" view shows (and feeds back) the same value."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from workflows.adapters import document_from_recipe
from workflows.models import Recipe

from .conftest import ARTIFACTS, BrowserPage
from .editor_page import apply_panel, click_settled, wait_settled

pytestmark = pytest.mark.e2e


@pytest.fixture
def demos(e2e_user: Any) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    e2e_user.is_staff = True
    e2e_user.save()


def open_step(page: Any, key: str, ready: str) -> None:
    wait_settled(page)
    page.evaluate(
        f"branchline.cy.elements().unselect(); branchline.nodeByKey('{key}').select(); null"
    )
    page.wait_for_selector(ready)
    wait_settled(page)


def saved(page: Any, recipe: Recipe) -> dict[str, Any]:
    wait_settled(page)
    assert page.evaluate("branchline.save(false)")
    recipe.refresh_from_db()
    return document_from_recipe(recipe)


def step_of(document: dict[str, Any], key: str) -> dict[str, Any]:
    return next(s for s in document["steps"] if s["key"] == key)


def test_a_decision_tree_edited_in_the_builder_round_trips(
    browser_page: BrowserPage, demos: None
) -> None:
    recipe = Recipe.objects.get(slug="regulatory-decision-tree")
    before = copy.deepcopy(document_from_recipe(recipe))
    page = browser_page.open_editor(recipe.slug)
    open_step(page, "choose_prompt", "#panel [name='dt-t.n.y-target']")
    assert page.input_value("#panel [name='dt-t.y-leaf']") == "safety_focused"
    assert page.input_value("#panel [name='dt-t.n.n.c.0-field']") == "image_count"
    assert not page.is_visible("#panel #id_tree")
    page.locator("#panel .tree-builder").scroll_into_view_if_needed()
    browser_page.screenshot("tree-builder")
    page.locator("#panel .tree-builder").screenshot(
        path=str(ARTIFACTS / f"{browser_page.name}-tree-builder-panel.png")
    )

    # Applied with nothing changed (Enter in a field applies at once): the document is the same.
    page.press("#panel [name=name]", "Enter")
    apply_panel(page)
    assert saved(page, recipe) == before

    # One leaf's target changed through the builder: only that changes.
    open_step(page, "choose_prompt", "#panel [name='dt-t.n.y-target']")
    page.select_option("#panel [name='dt-t.n.y-target']", "classify_base")
    apply_panel(page)
    expected = copy.deepcopy(before)
    step_of(expected, "choose_prompt")["leaf_targets"]["pii_focused"] = "classify_base"
    assert saved(page, recipe) == expected

    # The JSON view shows the same tree; an edit there shows in the builder and is applied.
    open_step(page, "choose_prompt", "#panel [name='dt-t.n.y-target']")
    click_settled(page, "#panel [data-op='dt-json']")
    page.wait_for_selector("#panel #id_tree")
    shown = json.loads(page.input_value("#panel #id_tree"))
    assert shown == step_of(expected, "choose_prompt")["tree"]
    assert (
        json.loads(page.input_value("#panel #id_leaf_targets"))
        == step_of(expected, "choose_prompt")["leaf_targets"]
    )
    page.locator("#panel #id_tree").scroll_into_view_if_needed()
    browser_page.screenshot("tree-json")
    shown["tree"]["if_false"]["if_false"]["condition"]["conditions"][0]["value"] = 3
    page.fill("#panel #id_tree", json.dumps(shown, indent=2))
    click_settled(page, "#panel [data-op='dt-builder']")
    page.wait_for_selector("#panel [name='dt-t.n.n.c.0-value']")
    assert page.input_value("#panel [name='dt-t.n.n.c.0-value']") == "3"
    apply_panel(page)
    step_of(expected, "choose_prompt")["tree"] = shown
    assert saved(page, recipe) == expected
    assert not browser_page.errors


def test_classification_routes_edited_in_the_table_round_trip(
    browser_page: BrowserPage, demos: None
) -> None:
    recipe = Recipe.objects.get(slug="document-routing")
    before = copy.deepcopy(document_from_recipe(recipe))
    page = browser_page.open_editor(recipe.slug)
    open_step(page, "classify_document", "#panel [name='rt-0-name']")
    assert page.input_value("#panel [name='rt-0-name']") == "invoice"
    assert page.is_visible("#panel .routes-table code:text('process_invoice')")
    page.locator("#panel .routes-builder").scroll_into_view_if_needed()
    browser_page.screenshot("routes-table")

    page.press("#panel [name=name]", "Enter")
    apply_panel(page)
    assert saved(page, recipe) == before

    open_step(page, "classify_document", "#panel [name='rt-1-instructions']")
    page.fill("#panel [name='rt-1-instructions']", "Contracts and agreements.\nDrafts too.")
    page.check("#panel [name='rt-2-always_active']")
    apply_panel(page)
    expected = copy.deepcopy(before)
    routes = step_of(expected, "classify_document")["routes"]
    routes[1]["instructions"] = "Contracts and agreements.\nDrafts too."
    routes[2]["always_active"] = True
    assert saved(page, recipe) == expected

    open_step(page, "classify_document", "#panel [name='rt-0-name']")
    click_settled(page, "#panel [data-op='rt-json']")
    page.wait_for_selector("#panel #id_routes")
    shown = json.loads(page.input_value("#panel #id_routes"))
    assert shown == routes
    shown[0]["examples"][0]["reason"] = "Asks to be paid"
    page.fill("#panel #id_routes", json.dumps(shown))
    click_settled(page, "#panel [data-op='rt-builder']")
    page.wait_for_selector("#panel [name='rt-0-ex-0-reason']")
    assert page.input_value("#panel [name='rt-0-ex-0-reason']") == "Asks to be paid"
    apply_panel(page)
    step_of(expected, "classify_document")["routes"] = shown
    assert saved(page, recipe) == expected
