"""Test runs from the editor: the path highlighted live, recipe tests and their coverage."""

from __future__ import annotations

from typing import Any

import pytest

from editor.models import RecipeTest
from tests.editor.conftest import STORY
from workflows.models import Recipe
from workflows.services import recipe_publish

from .conftest import BrowserPage
from .editor_page import (
    canvas_point,
    click_settled,
    edge_classes,
    wait_applied,
    wait_settled,
)

pytestmark = pytest.mark.e2e


def test_a_test_run_highlights_its_path_and_becomes_a_passing_test_with_coverage(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    page = browser_page.open_editor(story.slug)
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    page.fill("#panel-testrun [name=input_topic]", "a lighthouse")
    page.fill("#panel-testrun [name=script_writer]", f"Too short.\n---\n{STORY}")
    page.fill("#panel-testrun [name=script_judge]", "9")
    click_settled(page, "#panel-testrun button.primary")
    page.wait_for_selector("#testrun-live[data-run]")
    page.wait_for_function("branchline.testRunFinished", timeout=30000)
    page.wait_for_selector("#testrun-result .run-result")
    # This live server has no websockets: the panel fell back to polling the events.
    assert page.evaluate("branchline.testRunTransport") == "polling"

    assert "run-visited" in page.evaluate("branchline.nodeByKey('write').classes()")
    assert "run-visited" not in page.evaluate("branchline.nodeByKey('review').classes()")
    assert "run-taken" in edge_classes(page, "write", "too_short")
    assert "run-taken" in edge_classes(page, "write", "great")
    assert "run-lost" in edge_classes(page, "write", "broken")
    reason = page.evaluate("branchline.edgeByName('write', 'broken').data('runReason')")
    assert reason.startswith("not taken: ")
    point = canvas_point(page, "branchline.edgeByName('write', 'broken')")
    page.mouse.move(point["x"], point["y"])
    page.wait_for_selector("#edge-tip:not([hidden])")
    assert "not taken: " in page.inner_text("#edge-tip")
    browser_page.screenshot("test-run")

    result = page.inner_text("#testrun-result")
    assert "succeeded" in result
    assert "write → write" in result
    assert page.input_value("#test-save [name=expected_path]") == "write → write"
    page.fill("#test-save [name=name]", "short then approved")
    click_settled(page, "#test-save button[type=submit]")
    page.wait_for_selector("#test-save .applied")
    assert "it passed" in page.inner_text("#test-save")

    page.click("#tab-tests")
    page.wait_for_selector("#tests .test-row")
    first_run = RecipeTest.objects.get().last_run_id
    wait_settled(page)  # the list reloads when a test is saved
    page.evaluate("window.listBeforeRun = document.getElementById('tests')")
    with page.expect_response(lambda response: "/tests/run/" in response.url):
        click_settled(page, "#tests button.primary")
    assert RecipeTest.objects.get().last_run_id != first_run
    page.wait_for_function(
        "document.getElementById('tests') !== window.listBeforeRun"
        " && document.querySelector('#tests .test-row .badge')?.textContent === 'passed'"
        " && !document.querySelector('#tests[hx-trigger]')",
        timeout=30000,
    )
    assert RecipeTest.objects.get().last_result == "passed"
    coverage = page.inner_text("#tests")
    assert "2 of 7" in coverage
    untaken = page.locator("#tests .untaken")
    assert "to_review" in untaken.inner_text()
    assert "great" not in untaken.inner_text()
    page.click("#btn-show-coverage")
    assert "uncovered" in edge_classes(page, "write", "to_review")
    assert "covered" in edge_classes(page, "write", "great")
    browser_page.screenshot("coverage")


def test_the_test_run_tab_follows_the_canvas_and_keeps_what_was_typed(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    assert "as the canvas shows it" in page.inner_text("#panel-testrun")
    page.fill("#panel-testrun [name=input_topic]", "a lighthouse")

    # A new input on the canvas, not saved: the form offers it, and keeps the topic typed.
    page.click("#tab-recipe")
    page.wait_for_selector("#panel-recipe [name='inputs-1-name']")
    page.fill("#panel-recipe [name='inputs-1-name']", "tone")
    wait_applied(page, "#panel-recipe")
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_tone]")
    assert page.input_value("#panel-testrun [name=input_topic]") == "a lighthouse"
    assert not story.versions.exists()
