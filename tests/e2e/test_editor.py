"""The recipe editor in a real browser: draw steps and branches, edit them, lint, keyboard."""

from __future__ import annotations

from typing import Any

import pytest

from tests.editor.conftest import story_document
from tests.factories import ActorFactory
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_import

from .conftest import BrowserPage
from .editor_page import (
    add_step,
    apply_panel,
    click_settled,
    drag_branch,
    outline_text,
    selected_key,
    wait_saved,
    wait_settled,
)

pytestmark = [pytest.mark.e2e, pytest.mark.smoke]


def test_an_author_draws_a_recipe_saves_it_and_publishes_it(
    browser_page: BrowserPage, e2e_user: Any
) -> None:
    ActorFactory(name="scripted-writer")
    page = browser_page.open("/")
    page.click("text=New recipe")
    page.fill("#id_name", "Story QC")
    page.click("button[name=create]")
    browser_page.wait_ready()
    assert page.url.endswith("/recipes/story-qc/")

    add_step(page, "llm")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.fill("#panel [name=name]", "Write")
    page.fill("#panel [name=key]", "write")
    # With no alias yet, the new step starts with the first model, under an alias of its name.
    assert page.input_value("#panel [name=actor]") == "scripted-writer"
    page.fill("#panel [name=prompt]", "Write a short story.")
    apply_panel(page)

    add_step(page, "llm")
    page.wait_for_function("document.querySelector('#panel [name=key]')?.value === 'step_1'")
    page.fill("#panel [name=name]", "Polish")
    page.fill("#panel [name=key]", "polish")
    page.click("#panel .chip[data-insert='step1_response']")
    assert page.input_value("#panel [name=prompt]") == "{step1_response}"
    page.fill("#panel [name=prompt]", "Polish this: {step1_response} {tone}")
    error = page.wait_for_selector("#panel .prompt-editor .field-error")
    assert "'tone'" in error.inner_text()
    assert "Add `tone` as an input" in error.inner_text()
    page.fill("#panel [name=prompt]", "Polish this: {step1_response}")
    apply_panel(page)
    page.wait_for_function("document.getElementById('save-state').textContent.includes('Unsaved')")

    drag_branch(page, "write", "polish")
    page.wait_for_selector("#panel form[data-editor-form=branch]")
    page.select_option("#panel [name='c-type']", "length_check")
    page.wait_for_selector("#panel [name='c-value']")
    page.select_option("#panel [name='c-operator']", "less_than")
    page.fill("#panel [name='c-value']", "200")
    page.select_option("#panel [name=action]", "REQUEST_MORE_DETAIL")
    page.fill("#panel [name=retry_suffix]", "Longer, please.")
    page.fill("#panel [name=max_retries]", "2")
    apply_panel(page)
    assert "runs this step again" in page.inner_text("#panel .note")
    browser_page.screenshot("drawn")

    page.click("#btn-save")
    wait_saved(page)
    saved = document_from_recipe(Recipe.objects.get(slug="story-qc"))
    assert [s["key"] for s in saved["steps"]] == ["write", "polish"]
    assert saved["steps"][0]["branches"] == [
        {
            "name": "to_polish",
            "priority": 1,
            "when": {"type": "length_check", "operator": "less_than", "value": 200},
            "action": "REQUEST_MORE_DETAIL",
            "target": "@repeat",
            "params": {"retry_suffix": "Longer, please.", "max_retries": 2},
        }
    ]
    assert saved["actors"] == {"scripted-writer": "scripted-writer"}
    assert all("position" in s for s in saved["steps"])

    page.reload()
    browser_page.wait_ready()
    assert "REQUEST_MORE_DETAIL" in outline_text(page, "len < 200")
    label = page.evaluate("branchline.edgeByName('write', 'to_polish').data('label')")
    assert label == "if len < 200 → again"
    assert page.evaluate("branchline.edgeByName('write', 'to_polish').isLoop()")

    page.click("#tab-versions")
    page.fill("#panel-versions [name=note]", "first cut")
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .applied")
    assert "Published v1." in page.inner_text("#panel-versions")
    assert "first cut" in page.inner_text("#panel-versions")
    assert Recipe.objects.get(slug="story-qc").versions.get().note == "first cut"
    browser_page.screenshot("published")


def test_an_unreachable_step_shows_in_the_lint_panel_and_clicking_selects_it(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    doc = story_document(slug="lonely")
    doc["steps"].append(
        {
            "key": "lonely",
            "name": "Lonely",
            "kind": "llm",
            "actor": "writer",
            "prompt": "",
            "position": {"x": 700, "y": 300},
            "branches": [],
        }
    )
    doc["steps"][1]["branches"].append(
        {
            "name": "otherwise",
            "priority": 9,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "@complete",
        }
    )
    recipe_import(user=e2e_user, data=doc)
    page = browser_page.open_editor("lonely")
    problem = page.locator("#lint .problem", has_text="never reached")
    problem.wait_for()
    assert "steps[2]" in problem.inner_text()
    problem.locator("button").click()
    page.wait_for_selector("#panel form[data-editor-form=step]")
    assert selected_key(page) == "lonely"
    # The step list is a keyboard path to every step and branch.
    page.focus("#outline .outline-item.step >> nth=0")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.path") == "steps[0].branches[1]"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.dataset.path") == "steps[2]"
    page.keyboard.press("Enter")
    page.wait_for_function("branchline.cy.$(':selected').data('key') === 'lonely'")
    assert page.input_value("#panel [name=key]") == "lonely"
    assert "has-warning" in page.evaluate("branchline.nodeByKey('lonely').classes()")
    browser_page.screenshot("lint")


def test_the_keyboard_deletes_undoes_and_redoes_and_branches_reorder(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Review")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.focus("#cy")
    page.keyboard.press("Delete")
    page.wait_for_function("branchline.nodeByKey('review').empty()")
    page.wait_for_selector("#lint .problem.error")  # the branch that led there is now broken
    page.keyboard.press("Control+z")
    page.wait_for_function("branchline.nodeByKey('review').nonempty()")
    assert (
        page.evaluate("branchline.edgeByName('write', 'to_review').target().data('key')")
        == "review"
    )
    page.keyboard.press("Control+Shift+z")
    page.wait_for_function("branchline.nodeByKey('review').empty()")
    page.keyboard.press("Control+z")
    page.wait_for_function("branchline.nodeByKey('review').nonempty()")

    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel .branch-order li")
    page.click("#panel .branch-order li[data-branch='0'] [data-move=down]")
    page.wait_for_function("branchline.edgeByName('write', 'broken').data('branch').priority === 1")
    assert page.evaluate("branchline.edgeByName('write', 'too_short').data('branch').priority") == 2
    first = page.locator("#panel .branch-order li").first
    first.wait_for()
    page.wait_for_function(
        "document.querySelector('#panel .branch-order li button.link').textContent.includes('broken')"
    )
    wait_settled(page)
    # Dragging in the list reorders too; the priorities keep their values, in the new order.
    page.drag_and_drop(
        "#panel .branch-order li[data-branch='3']", "#panel .branch-order li[data-branch='0']"
    )
    page.wait_for_function(
        "branchline.edgeByName('write', 'to_review').data('branch').priority === 1"
    )
    assert page.evaluate("branchline.edgeByName('write', 'great').data('branch').priority") == 999
    page.wait_for_function("branchline.dirty")
    page.keyboard.press("Control+s")
    wait_saved(page)
    branches = document_from_recipe(story)["steps"][0]["branches"]
    assert [(b["name"], b["priority"]) for b in branches] == [
        ("to_review", 1),
        ("broken", 2),
        ("too_short", 3),
        ("great", 999),
    ]


def test_the_step_form_shows_the_settings_of_its_kind_only(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel [name=kind]")
    assert not page.is_visible("#panel [name=options]")
    assert not page.is_visible("#panel [data-op=dt-json]")
    page.select_option("#panel [name=kind]", "human")
    assert page.is_visible("#panel [name=options]")
    page.select_option("#panel [name=kind]", "decision_tree")
    # The tree is edited in its builder (its JSON behind the advanced toggle).
    page.wait_for_selector("#panel [data-op=dt-json]")
    assert page.is_visible("#panel [data-op=dt-json]")
    assert not page.is_visible("#panel [name=options]")


# Drafts list branches by priority (as the rows are read back); equal priorities keep their order.
