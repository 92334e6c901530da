"""The side panel never loses an edit: fields apply as typed, an invalid one waits beside its
error while the others apply, the save state says what is not applied, and a broken reference
is fixed in one click."""

from __future__ import annotations

from typing import Any

import pytest

from tests.editor.conftest import story_document
from tests.factories import ActorFactory
from workflows.models import Recipe
from workflows.services import recipe_draft_save, recipe_import

from .conftest import BrowserPage
from .editor_page import apply_panel, wait_settled
from .test_everywhere import axe_violations

pytestmark = pytest.mark.e2e


def step_data(page: Any, key: str) -> dict[str, Any]:
    return page.evaluate(f"branchline.nodeByKey('{key}').data('step')")


def open_step(page: Any, name: str) -> None:
    page.click(f"#outline .outline-item.step >> text={name}")
    page.wait_for_function(f"document.querySelector('#panel [name=name]')?.value === {name!r}")


def watch_save_state(page: Any) -> None:
    """Record every text the save state shows from now on (`window.saveStates`)."""
    page.evaluate(
        """() => {
            window.saveStates = [];
            const state = document.getElementById('save-state');
            new MutationObserver(() => window.saveStates.push(state.textContent))
              .observe(state, {childList: true, characterData: true, subtree: true});
        }"""
    )


def test_an_edit_is_kept_after_switching_steps_without_apply(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    # Another step at once, before the pause that applies it: the edit applies all the same.
    open_step(page, "Review")
    wait_settled(page)
    assert step_data(page, "write")["name"] == "Draft"

    # An edit that is not right yet is kept too, with its error, when the step is opened again.
    open_step(page, "Draft")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    open_step(page, "Review")
    wait_settled(page)
    assert page.inner_text("#save-state") == "● Unapplied changes: Prompt"
    open_step(page, "Draft")
    wait_settled(page)
    assert page.input_value("#panel [name=prompt]") == "Reply to {message}"
    assert "message" in page.inner_text("#panel .prompt-editor .field-error")

    # Undo takes back the applied name, one change per pause.
    page.click("#btn-undo")
    wait_settled(page)
    assert step_data(page, "write")["name"] == "Write"


def test_an_invalid_field_is_shown_beside_itself_while_the_valid_ones_apply(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    wait_settled(page)
    step = step_data(page, "write")
    assert step["name"] == "Draft"
    assert step["prompt"] == "Write a story about {topic}"
    errors = page.locator("#panel .field-error")
    assert errors.count() == 1  # beside the prompt, not repeated at the top
    assert page.locator("#panel .prompt-editor .field-error").count() == 1
    assert page.inner_text("#panel .panel-state") == "Not applied: Prompt (see below)"
    assert page.get_attribute("#panel [name=prompt]", "aria-invalid") == "true"
    browser_page.screenshot("panel-invalid-field")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert axe_violations(page) == [], scheme


def test_the_save_state_never_says_saved_over_unapplied_work(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    assert page.is_checked("#autosave")
    open_step(page, "Write")
    watch_save_state(page)
    page.fill("#panel [name=name]", "Draft")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    # The valid name applies and is autosaved; the prompt is not applied, and the state says so.
    page.wait_for_function("window.saveStates.includes('Saving…')", timeout=10000)
    wait_settled(page)
    story.refresh_from_db()
    assert page.inner_text("#save-state") == "● Unapplied changes: Prompt"
    assert "Saved" not in page.evaluate("window.saveStates")
    assert page.evaluate(
        "() => { const e = new Event('beforeunload', {cancelable: true});"
        " window.dispatchEvent(e); return e.defaultPrevented; }"
    )

    # Declared in one click, the input lets the prompt apply; then it is saved.
    page.click("#panel .prompt-editor button.fix:text('Add `message` as an input')")
    page.wait_for_function("document.getElementById('save-state').textContent === 'Saved'")
    assert step_data(page, "write")["prompt"] == "Reply to {message}"


def test_add_input_fix_declares_the_input_and_applies_the_prompt_in_one_undo(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    fix = page.wait_for_selector("#panel .prompt-editor button.fix")
    assert fix.inner_text() == "Add `message` as an input"
    fix.click()
    apply_panel(page)
    assert step_data(page, "write")["prompt"] == "Reply to {message}"
    inputs = page.evaluate("branchline.meta().inputs")
    assert inputs["message"] == {"type": "string"}
    assert page.locator("#panel .field-error").count() == 0
    # The prompt's names offer the new input now.
    assert page.locator("#panel .chip[data-insert='message']").count() == 1

    page.click("#btn-undo")
    wait_settled(page)
    assert "message" not in page.evaluate("branchline.meta().inputs")
    assert step_data(page, "write")["prompt"] == "Write a story about {topic}"


def test_a_judge_naming_an_actor_without_alias_is_fixed_in_one_click(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    doc = story_document(slug="judged", name="Judged")
    doc["actors"].pop("judge")
    doc["steps"][0]["validation"] = {
        "threshold": 0.5,
        "judge": "editor-judge",
        "fallback": "Sorry.",
    }
    doc["steps"][0]["branches"] = [
        b for b in doc["steps"][0]["branches"] if "evaluator" not in b["when"]
    ]
    recipe = recipe_import(user=e2e_user, data=story_document(slug="judged")).recipe
    recipe_draft_save(recipe=recipe, document=doc)  # saved with its error, as a draft may be
    page = browser_page.open_editor(recipe.slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    wait_settled(page)
    fix = page.locator("#panel button.fix:text('Add judge alias for editor-judge')")
    assert fix.count() == 1
    fix.click()
    apply_panel(page)
    assert page.evaluate("branchline.meta().actors")["editor-judge"] == "editor-judge"
    assert step_data(page, "write")["validation"]["judge"] == "editor-judge"
    assert page.locator("#panel .field-error").count() == 0


def test_every_actor_picker_lists_every_actor_and_adds_the_alias(
    browser_page: BrowserPage, story: Recipe
) -> None:
    ActorFactory(name="other-judge")
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.click("#panel summary:text('Validation')")
    page.check("#panel [name=validation_enabled]")
    judges = page.eval_on_selector_all(
        "#panel [name=judge] option", "options => options.map(o => o.value)"
    )
    actors = page.eval_on_selector_all(
        "#panel [name=actor] option", "options => options.map(o => o.value)"
    )
    assert judges[1:] == actors[1:]  # one list, from one place
    page.fill("#panel [name=fallback]", "Sorry.")
    page.select_option("#panel [name=judge]", "+other-judge")
    apply_panel(page)
    assert step_data(page, "write")["validation"]["judge"] == "other-judge"
    assert page.evaluate("branchline.meta().actors")["other-judge"] == "other-judge"
    # Drawn again from the document, the picker names the new alias.
    assert page.input_value("#panel [name=judge]") == "other-judge"


def test_the_evaluator_picker_lists_every_actor_and_fixes_a_missing_alias_in_one_click(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    doc = story_document(slug="evaluated", name="Evaluated")
    doc["actors"].pop("judge")
    doc["steps"][0]["branches"][2]["when"]["evaluator"] = "editor-judge"
    recipe = recipe_import(user=e2e_user, data=story_document(slug="evaluated")).recipe
    recipe_draft_save(recipe=recipe, document=doc)  # saved with its error, as a draft may be
    page = browser_page.open_editor(recipe.slug)
    open_step(page, "Write")
    actors = page.eval_on_selector_all(
        "#panel [name=actor] option", "options => options.map(o => o.value)"
    )
    page.click('#outline [data-path="steps[0].branches[2]"]')
    page.wait_for_selector("#panel [name=c-evaluator]")
    evaluators = page.eval_on_selector_all(
        "#panel [name=c-evaluator] option", "options => options.map(o => o.value)"
    )
    assert set(actors) <= set(evaluators)  # every actor, as the step's picker lists them
    assert "+editor-judge" in evaluators
    page.fill("#panel [name=name]", "very_good")
    wait_settled(page)
    fix = page.locator("#panel button.fix:text('Add judge alias for editor-judge')")
    assert fix.count() == 1
    fix.click()
    apply_panel(page)
    assert page.evaluate("branchline.meta().actors")["editor-judge"] == "editor-judge"
    branch = page.evaluate("branchline.edgeByName('write', 'very_good').data('branch')")
    assert branch["when"]["evaluator"] == "editor-judge"
    assert page.locator("#panel .field-error").count() == 0


def test_the_recipe_tab_applies_as_typed_and_keeps_what_is_not_right_across_tabs(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#tab-recipe")
    page.wait_for_selector("#panel-recipe [name='recipe-description']")
    page.fill("#panel-recipe [name='recipe-description']", "Stories, reviewed.")
    page.fill("#panel-recipe [name='recipe-name']", "")
    wait_settled(page)
    assert "Name" in page.inner_text("#save-state")
    assert page.evaluate("branchline.meta().description") == "Stories, reviewed."
    assert page.evaluate("branchline.meta().name") == story.name
    page.click("#tab-properties")
    page.click("#tab-recipe")
    page.wait_for_selector("#panel-recipe [name='recipe-name']")
    wait_settled(page)
    assert page.input_value("#panel-recipe [name='recipe-name']") == ""
    assert page.locator("#panel-recipe .field-error").count() == 1
    page.fill("#panel-recipe [name='recipe-name']", "Stories")
    wait_settled(page)
    assert page.evaluate("branchline.meta().name") == "Stories"
    assert page.evaluate("branchline.meta().description") == "Stories, reviewed."
